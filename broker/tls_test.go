package broker_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/internal/brokertest"
)

// selfSigned writes a certificate for 127.0.0.1 and its key to dir and
// returns their paths and a pool trusting the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "switchyard test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	return certFile, keyFile, pool
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
