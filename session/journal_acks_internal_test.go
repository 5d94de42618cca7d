package session

import "testing"

// TestPubAckSeq reads the sequence of a JetStream publish acknowledgement
// and refuses anything else (the record then goes the patient way).
func TestPubAckSeq(t *testing.T) {
	for _, c := range []struct {
		data string
		want uint64
		ok   bool
	}{
		{`{"stream":"KV_sy_kv_s","seq":42}`, 42, true},
		{`{"stream":"KV_sy_kv_s","domain":"hub","seq":7,"duplicate":true}`, 7, true},
		{`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 41"},"stream":"KV_sy_kv_s","seq":0}`, 0, false},
		{`{"stream":"KV_sy_kv_s","seq":0}`, 0, false},
		{`{"stream":"KV_sy_kv_s"}`, 0, false},
		{``, 0, false},
	} {
		got, ok := pubAckSeq([]byte(c.data))
		if got != c.want || ok != c.ok {
			t.Errorf("pubAckSeq(%s) = %d, %v; want %d, %v", c.data, got, ok, c.want, c.ok)
		}
	}
}
