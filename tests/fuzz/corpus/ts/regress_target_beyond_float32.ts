@targetLabel true
@data
1,2:3.5e38
