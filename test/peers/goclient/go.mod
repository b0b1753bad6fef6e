module fnr.test/peers/goclient

go 1.25.7

require (
	github.com/nephio-project/porch v1.5.8
	google.golang.org/grpc v1.79.3
)

require (
	golang.org/x/net v0.48.0 // indirect
	golang.org/x/sys v0.40.0 // indirect
	golang.org/x/text v0.32.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20251202230838-ff82c1b0f217 // indirect
	google.golang.org/protobuf v1.36.10 // indirect
)

replace github.com/kptdev/kpt => github.com/kptdev/kpt v1.0.0-beta.61
