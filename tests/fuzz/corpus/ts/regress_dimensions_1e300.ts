@dimensions 1e300
@classLabel true a b
@data
1:a
