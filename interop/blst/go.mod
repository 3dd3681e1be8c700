module github.com/palisade-dev/palisade/interop/blst

go 1.24

require github.com/supranational/blst v0.3.14
