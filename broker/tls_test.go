package broker_test

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
)

func selfSigned(t *testing.T, dir string) (string, string, *x509.CertPool) {
	return brokertest.SelfSigned(t, dir)
}

func TestTLSListener(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	b := brokertest.Start(t, brokertest.Listen("tok", ""), brokertest.Configure(func(c *broker.Config) {
		c.TLSCert, c.TLSKey = certFile, keyFile
	}))
	url := b.ClientURL()
	require.True(t, strings.HasPrefix(url, "tls://127.0.0.1:"), url)

	nc, err := nats.Connect(url, nats.Token("tok"), nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	require.NoError(t, err)
	defer nc.Close()
	require.True(t, nc.TLSRequired())
	require.NoError(t, nc.Flush())

	_, err = nats.Connect(url, nats.Token("tok"))
	require.Error(t, err, "an untrusted certificate is refused")

	_, err = broker.Start(ctx(t), broker.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Token: "t",
		TLSCert: filepath.Join(t.TempDir(), "missing.pem"), TLSKey: keyFile})
	require.ErrorContains(t, err, "TLS")
}
