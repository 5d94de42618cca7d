package session

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// lastFromLeader reads the last message on subject of stream from the
// stream's leader (the STREAM.MSG.GET API), never from a replica. A
// KeyValue Get is a direct get when the bucket allows it (KV buckets do),
// and any replica within 90% of the log answers those: right after a
// server restart, one that has not caught up yet answers an old value — an
// owner's mark from before a takeover, which made a live owner conclude it
// had lost its lease. It returns jetstream.ErrKeyNotFound when the subject
// holds nothing.
func lastFromLeader(ctx context.Context, js jetstream.JetStream, stream, subject string) ([]byte, uint64, error) {
	prefix := js.Options().APIPrefix
	if prefix == "" {
		prefix = jetstream.DefaultAPIPrefix
	}
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return nil, 0, err
	}
	m, err := js.Conn().RequestWithContext(ctx, prefix+"STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, 0, err
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Seq  uint64 `json:"seq"`
			Data []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, 0, fmt.Errorf("session: stream %s: %w", stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, 0, jetstream.ErrKeyNotFound
	case resp.Error != nil:
		return nil, 0, resp.Error
	case resp.Message == nil:
		return nil, 0, fmt.Errorf("session: stream %s: an empty reply", stream)
	}
	return resp.Message.Data, resp.Message.Seq, nil
}
