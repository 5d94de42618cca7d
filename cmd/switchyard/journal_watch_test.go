package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
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
// It reads two ways at once, and a record read either way counts:
//
//   - the copy: the server itself copies the entries, as they are stored,
//     into a stream of the test's (journalCopy, sourced from the session's
//     bucket). A reader in the test process, slowed by the race detector on
//     a loaded machine, fell more than the journal's kept records behind a
//     flood and lost records to compaction before it read them; the copy
//     keeps them all, and survives the server's restarts with the rest of
//     the store. But the copy lags over a restart: nats-server sets a
//     stream's sources up 100-200 ms after it recovers, and 2 s later again
//     (and more) when the source was not there yet, while the second
//     process fires what the first left and writes thousands of records
//     meanwhile. Clean-clone CI runs lost record 167,786 and then 100,794
//     of 200,000 that way, each compacted before the copy resumed — the
//     second while the machine also built the module from an empty cache.
//   - the bucket: a consumer of the test's on the session's bucket itself,
//     made again as soon as the second process's server is up, catches what
//     the copy has not yet while the copy resumes; the copy catches what it
//     fell behind during a flood.
//
// A record written again (after a restart) replaces its first copy: each
// is kept with the bucket's sequence of the entry it came in (the copy's
// Nats-Stream-Source header gives it), and a later one wins whichever way
// it was read. Each way reads one process at a time (follow), and goes on
// after the next from where it stopped.
//
// The serving processes also keep watchKeep records (serve --journal-keep):
// a record leaves the bucket only long after either way has it, and the
// runs still compact.
type journalWatch struct {
	session string

	mu   sync.Mutex
	recs map[uint64]watched // by record number
	// next is, for each stream read (the copy, the bucket), its next
	// sequence to read.
	next map[string]uint64
	err  error // a record that would not decode
	// took is signalled (never blocking) whenever take read an entry.
	took chan struct{}
}

// watched is a journal record and the bucket's sequence of the entry it
// was stored in.
type watched struct {
	rec *pb.JournalRecord
	at  uint64
}

func newJournalWatch(session string) *journalWatch {
	return &journalWatch{session: session, recs: map[uint64]watched{}, next: map[string]uint64{}, took: make(chan struct{}, 1)}
}

// follow reads the journal through b until the returned stop is called
// (or b's server goes away), from the copy and from the bucket. The bucket
// may not exist yet: follow waits for it (the serving process makes it
// when it starts the session).
func (w *journalWatch) follow(t *testing.T, b *broker.Broker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	bucket := broker.KVName(w.session)
	filter := "$KV." + bucket + ".journal.>"
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		w.read(ctx, b, journalCopy(w.session), "", func(ctx context.Context) error {
			// The copy is made once, before the session's bucket (a
			// source need not exist yet); later processes find it.
			_, err := b.JetStream().CreateStream(ctx, jetstream.StreamConfig{
				Name:    journalCopy(w.session),
				Storage: jetstream.FileStorage,
				Sources: []*jetstream.StreamSource{{Name: "KV_" + bucket, FilterSubject: filter}},
			})
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				return nil
			}
			return err
		})
	}()
	go func() {
		defer wg.Done()
		w.read(ctx, b, "KV_"+bucket, filter, nil)
	}()
	return func() { cancel(); wg.Wait() }
}

// read reads stream (only filter's subjects when set) from where it
// stopped until ctx ends, making it first with create when given, and again
// whenever the server went away.
func (w *journalWatch) read(ctx context.Context, b *broker.Broker, stream, filter string, create func(context.Context) error) {
	again := func() { // the server is going away, or the stream is not there yet: look again
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	for ctx.Err() == nil {
		if create != nil {
			if err := create(ctx); err != nil {
				again()
				continue
			}
		}
		w.mu.Lock()
		start := max(w.next[stream], 1)
		w.mu.Unlock()
		// A plain pull consumer without acknowledgements, not an ordered
		// one: an ordered consumer whose server died retries its reset for
		// ever, deaf to ctx.
		cons, err := b.JetStream().CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
			DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:       start,
			FilterSubject:     filter,
			AckPolicy:         jetstream.AckNonePolicy,
			InactiveThreshold: time.Minute,
		})
		if err != nil {
			again()
			continue
		}
		for ctx.Err() == nil {
			batch, err := cons.Fetch(256, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				break // the server went away: made again above
			}
			for m := range batch.Messages() {
				w.take(stream, m)
			}
			if batch.Error() != nil && !errors.Is(batch.Error(), nats.ErrTimeout) {
				break
			}
		}
	}
}

// watchKeep is how many journal records the watched processes keep.
const watchKeep = 131072

// journalCopy is the name of the test's copy of a session's journal.
func journalCopy(session string) string { return "TEST_JOURNAL_" + session }

// take records the records of one journal entry read from stream.
func (w *journalWatch) take(stream string, m jetstream.Msg) {
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
	// The bucket's sequence of the entry: the copy's source header has it
	// ("<stream> <seq> <filter> <transform> <subject>").
	at := md.Sequence.Stream
	if src := m.Headers().Get("Nats-Stream-Source"); src != "" {
		f := strings.Fields(src)
		if len(f) < 2 {
			return
		}
		if at, err = strconv.ParseUint(f[1], 10, 64); err != nil {
			return
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next[stream] = md.Sequence.Stream + 1
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
		// A record written again after a server restart replaces its
		// first copy, whichever way each was read.
		if old, ok := w.recs[r.GetSeq()]; !ok || old.at <= at {
			w.recs[r.GetSeq()] = watched{r, at}
		}
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
		_, have := w.recs[last]
		err := w.err
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
		r, ok := w.recs[seq]
		require.True(t, ok, "journal record %d was never read (compacted before the watch saw it)", seq)
		out = append(out, r.rec)
	}
	return out
}
