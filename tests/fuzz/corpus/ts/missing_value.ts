@classLabel true 0 1
@missing true
@data
1,?,3:0
