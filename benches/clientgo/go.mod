module keyedbackoff.bench/clientgo

go 1.26

require k8s.io/client-go v0.37.2
