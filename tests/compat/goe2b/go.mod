module github.com/hutch-sandbox/hutch/tests/compat/goe2b

go 1.25

require (
	github.com/matiasinsaurralde/go-e2b v0.1.1
	google.golang.org/protobuf v1.36.11
)

require connectrpc.com/connect v1.19.1 // indirect
