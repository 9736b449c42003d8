@problemName uni
@univariate true
@seriesLength 4
@classLabel true a b
@data
1,2,3,4:a
 +4.5 , 3 , 2 , 1 :b
