@classLabel true yes no
@data
1:2:3:yes
4:5:6:no
