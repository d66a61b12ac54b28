module github.com/hutch-sandbox/hutch/tests/compat/osbgo

go 1.25

require github.com/alibaba/OpenSandbox/sdks/sandbox/go v1.2.0

require golang.org/x/sync v0.7.0 // indirect
