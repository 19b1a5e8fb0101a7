module sidecar-terminator.io/images

go 1.24
