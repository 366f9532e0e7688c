module iotq.invalid/benchkit

go 1.26.0
