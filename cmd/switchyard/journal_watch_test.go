package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard/switchyard/broker"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// journalWatch reads a session's journal entries as the serving processes
// store them, so that a test sees every record the store ever held: the
// journal keeps only its last records (older ones are compacted), so a long
// run's history alone cannot show that each envelope was consumed once.
//
// The server itself copies the entries, as they are stored, into a stream
// of the test's (journalCopy, sourced from the session's bucket): a reader
// in the test process, slowed by the race detector on a loaded machine,
// fell more than the journal's kept records behind a flood and lost
// records to compaction before it read them. The copy keeps them all, and
// survives the server's restarts with the rest of the store. The watch
// reads the copy, one process at a time (follow), and goes on after the
// next from where it stopped.
//
// The copy itself lags over a restart: nats-server sets a stream's
// sources up 100-200 ms after it recovers, and 2 s later again (and
// more) when the source was not there yet, while the second process
// fires what the first left and writes thousands of records meanwhile;
// a clean-clone CI run lost record 167,786 of 200,000 that way, compacted
// before the copy resumed. So the serving processes keep watchKeep
// records (serve --journal-keep): a record leaves the bucket only long
// after the copy has it, and the runs still compact. 65,536 was not
// always enough: a clean-clone CI run whose machine was also building
// the module from an empty cache lost record 100,794 of 200,000 (the
// first the second process wrote) that way. At 131,072 a record written
// after the kill is compacted only once more records followed it than
// the whole second wave writes — the copy has its whole run to resume —
// and the first process's records are still compacted.
type journalWatch struct {
	session string

	mu   sync.Mutex
	recs map[uint64]*pb.JournalRecord // by record number
	next uint64                       // the bucket stream's next sequence to read
	err  error                        // a record that would not decode
	// took is signalled (never blocking) whenever take read an entry.
	took chan struct{}
}

func newJournalWatch(session string) *journalWatch {
	return &journalWatch{session: session, recs: map[uint64]*pb.JournalRecord{}, next: 1, took: make(chan struct{}, 1)}
}

// follow reads the journal through b until the returned stop is called
// (or b's server goes away). The bucket may not exist yet: follow waits
// for it (the serving process makes it when it starts the session).
func (w *journalWatch) follow(t *testing.T, b *broker.Broker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		bucket := broker.KVName(w.session)
		stream := journalCopy(w.session)
		for ctx.Err() == nil {
			w.mu.Lock()
			start := w.next
			w.mu.Unlock()
			// The copy is made once, before the session's bucket (a
			// source need not exist yet); later processes find it.
			_, err := b.JetStream().CreateStream(ctx, jetstream.StreamConfig{
				Name:    stream,
				Storage: jetstream.FileStorage,
				Sources: []*jetstream.StreamSource{{Name: "KV_" + bucket, FilterSubject: "$KV." + bucket + ".journal.>"}},
			})
			if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				select { // the server is going away: look again
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
				continue
			}
			// A plain pull consumer without acknowledgements, not an
			// ordered one: an ordered consumer whose server died retries
			// its reset for ever, deaf to ctx.
			cons, err := b.JetStream().CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
				DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
				OptStartSeq:       start,
				AckPolicy:         jetstream.AckNonePolicy,
				InactiveThreshold: time.Minute,
			})
			if err != nil {
				select { // the server is going away: look again
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
				continue
			}
			for ctx.Err() == nil {
				batch, err := cons.Fetch(256, jetstream.FetchMaxWait(time.Second))
				if err != nil {
					break // the server went away: made again above
				}
				for m := range batch.Messages() {
					w.take(m)
				}
				if batch.Error() != nil && !errors.Is(batch.Error(), nats.ErrTimeout) {
					break
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// watchKeep is how many journal records the watched processes keep.
const watchKeep = 131072

// journalCopy is the name of the test's copy of a session's journal.
func journalCopy(session string) string { return "TEST_JOURNAL_" + session }

// take records the records of one journal entry.
func (w *journalWatch) take(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	defer func() {
		select {
		case w.took <- struct{}{}:
		default:
		}
	}()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next = md.Sequence.Stream + 1
	if len(m.Data()) == 0 {
		return // a deletion or purge marker
	}
	entry := &pb.JournalRecord{}
	if err := proto.Unmarshal(m.Data(), entry); err != nil {
		w.err = err
		return
	}
	batch := entry.Batch
	entry.Batch = nil
	for _, r := range append([]*pb.JournalRecord{entry}, batch...) {
		w.recs[r.GetSeq()] = r // a record written again after a server restart replaces its first copy
	}
}

// upTo waits until the watch has read every record up to last and returns
// them in order; it fails the test on a gap (a record compacted before it
// was read) or one that did not decode.
func (w *journalWatch) upTo(t *testing.T, last uint64, within time.Duration) []*pb.JournalRecord {
	t.Helper()
	deadline := time.After(within)
	for {
		w.mu.Lock()
		err, have := w.err, w.recs[last] != nil
		w.mu.Unlock()
		require.NoError(t, err, "a journal entry did not decode")
		if have {
			break
		}
		select {
		case <-w.took:
		case <-deadline:
			t.Fatalf("the journal watch never read record %d", last)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*pb.JournalRecord, 0, last)
	for seq := uint64(1); seq <= last; seq++ {
		r := w.recs[seq]
		require.NotNil(t, r, "journal record %d was never read (compacted before the watch saw it)", seq)
		out = append(out, r)
	}
	return out
}
