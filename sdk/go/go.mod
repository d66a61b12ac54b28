module github.com/hutch-sandbox/hutch/sdk/go

go 1.19
