# a regression problem, unequal lengths
@problemName tiny_regression
@timeStamps false
@missing false
@univariate false
@dimensions 2
@equalLength false
@targetLabel true
@data
1.0,2.5,3:0.5,-1e-3,7:0.25
4,5:6,7:-2.5E2
