@classLabel true a b
@data
1e300,2:a
1,2:b
