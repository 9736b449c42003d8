@timeStamps true
@classLabel true 0 1
@data
(0,1),(1,2):0
