// Package proto holds the protobuf sources of Switchyard's wire messages
// (proto/switchyard/v1) and the generated Go code. Regenerate with:
//
//	go generate ./proto
//
//go:generate sh -c "cd .. && go tool -modfile=tools/go.mod buf generate"
package proto
