package actors

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// Envelope kinds.
const (
	KindHandoff     = "handoff"
	KindTick        = "tick"
	KindEvent       = "event"
	KindHumanAnswer = "human_answer"
	KindControl     = "control"
	// KindSteer is a steering message: it fires nothing; the session's
	// next firing of a node that does work gets it as an input message.
	KindSteer = "steer"
)

// DecodeEnvelope reads an envelope in its protobuf form, or in its JSON
// form (protojson) when the data starts with '{'. It checks the fields a
// node relies on.
func DecodeEnvelope(data []byte) (*pb.Envelope, error) {
	if len(data) == 0 {
		return nil, errors.New("empty envelope")
	}
	env := &pb.Envelope{}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		if err := (protojson.UnmarshalOptions{}).Unmarshal(t, env); err != nil {
			return nil, fmt.Errorf("bad JSON envelope: %v", err)
		}
	} else if err := proto.Unmarshal(data, env); err != nil {
		return nil, fmt.Errorf("bad protobuf envelope: %v", err)
	}
	switch env.GetKind() {
	case "":
		env.Kind = KindHandoff
	case KindHandoff, KindTick, KindEvent, KindHumanAnswer, KindControl, KindSteer:
	default:
		return nil, fmt.Errorf("unknown envelope kind %q", env.GetKind())
	}
	return env, nil
}

func jitter() float64 { return rand.Float64() }
