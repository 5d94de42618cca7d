package broker_test

import "github.com/nats-io/nats.go/jetstream"

func jetstreamMsgID(id string) jetstream.PublishOpt { return jetstream.WithMsgID(id) }
