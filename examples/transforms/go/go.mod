module sluice.invalid/examples/transforms/go

go 1.24
