@classLabel true a b
@missing true
@data
1,2,NaN,?:3,4,nan,?:a
?,2,3:NaN,5,?:b
1,,3:4,5,N/A:a
