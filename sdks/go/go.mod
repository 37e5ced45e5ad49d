module github.com/msgmesh/msgmesh/sdks/go

go 1.26.8

require github.com/tmaxmax/go-sse v0.12.0
