@problemName Unlabeled
@dimensions 2
@classLabel false
@data
1,2,3:4,5,6
7:8
