package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/internal/testcert"
	"golang.org/x/crypto/bcrypt"
)

// writeSelfSigned writes a certificate for 127.0.0.1 and its key into dir
// and returns the certificate's pool for a client that trusts it.
func writeSelfSigned(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	_, _, pool, err := testcert.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// `gputop serve --metrics --web.config.file` with a real exporter-toolkit
// web configuration (a self-signed certificate, one basic-auth user):
// HTTPS with that certificate, the right password answered, a wrong one,
// another user and none refused, plain HTTP not served; a configuration
// that does not load stops serve before it starts, naming the file; the
// flag without --metrics is refused, and so is a window out of bounds.
func TestMetricsWebConfigAndFlags(t *testing.T) {
	dir := t.TempDir()
	pool := writeSelfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("right horse"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "web.yml")
	// relative paths: exporter-toolkit takes them from the file's directory
	write(t, cfg, "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\nbasic_auth_users:\n  prom: "+string(hash)+"\n", 0o600)
	s := startMetricsServe(t, 0, "--web.config.file", cfg)
	if want := "gputop serve: metrics: serving " + s.addr + "/metrics with TLS and basic auth as " + cfg + " sets"; !strings.Contains(s.stderr.String(), want) {
		t.Errorf("serve's log lacks %q:\n%s", want, s.stderr.String())
	}
	url := "https://" + s.addr + "/metrics"
	trusting := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(c *http.Client, url, user, pass string) (int, string, error) {
		req, _ := http.NewRequest("GET", url, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		r, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b), nil
	}
	for _, c := range []struct{ user, pass string }{{"", ""}, {"prom", "wrong horse"}, {"other", "right horse"}, {"prom", ""}} {
		code, body, err := get(trusting, url, c.user, c.pass)
		if err != nil || code != http.StatusUnauthorized || strings.Contains(body, "gputop_") {
			t.Errorf("user %q password %q: %d %v, want 401 and no metrics:\n%s", c.user, c.pass, code, err, body)
		}
	}
	code, body, err := get(trusting, url, "prom", "right horse")
	if err != nil || code != http.StatusOK || !strings.Contains(body, "gputop_snapshots_total 0") {
		t.Fatalf("the right password: %d %v\n%s", code, err, body)
	}
	// TLS is real: a client that does not trust the certificate gets no
	// answer, and plain HTTP gets no metrics
	if _, _, err := get(&http.Client{Timeout: 10 * time.Second}, url, "prom", "right horse"); err == nil ||
		!strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client without the certificate: %v, want a certificate error", err)
	}
	if code, body, err := get(&http.Client{Timeout: 10 * time.Second}, "http://"+s.addr+"/metrics", "prom", "right horse"); err == nil &&
		(code == http.StatusOK || strings.Contains(body, "gputop_")) {
		t.Errorf("plain HTTP was served: %d\n%s", code, body)
	}
	for _, l := range strings.Split(strings.TrimRight(s.stderr.String(), "\n"), "\n") {
		if !strings.HasPrefix(l, "gputop serve: ") {
			t.Errorf("serve's stderr has a line that is not gputop's log: %q", l)
		}
	}

	// a configuration that does not load: serve stops before it starts
	bad := filepath.Join(dir, "bad.yml")
	write(t, bad, "basic_auth_users:\n  prom: right horse\n", 0o600) // not a bcrypt hash
	for _, c := range []struct{ path, says string }{
		{bad, "--web.config.file " + bad + ": "},
		{filepath.Join(dir, "none.yml"), "--web.config.file " + filepath.Join(dir, "none.yml") + ": open "},
	} {
		sock := filepath.Join(t.TempDir(), "s.sock")
		out, code := run(t, "serve", "--source", "agent", "--socket", sock, "--metrics", "127.0.0.1:0", "--web.config.file", c.path)
		if code != 1 || !strings.Contains(out, c.says) {
			t.Errorf("%s: exit %d, want 1 and %q:\n%s", c.path, code, c.says, out)
		}
		if _, err := os.Stat(sock); err == nil {
			t.Errorf("%s: the agent socket was created", c.path)
		}
	}
	out, code := run(t, "serve", "--source", "agent", "--web.config.file", cfg)
	if code != 2 || !strings.Contains(out, "--web.config.file "+cfg+": it configures --metrics, which is not given") {
		t.Errorf("--web.config.file without --metrics: exit %d\n%s", code, out)
	}
	for args, says := range map[string]string{
		"--metrics-window 10s":                "--metrics-window 10s: it configures --metrics, which is not given",
		"--metrics :0 --metrics-window 500ms": "--metrics-window 500ms: want 1s to 1h",
		"--metrics :0 --metrics-window 2h":    "--metrics-window 2h0m0s: want 1s to 1h",
	} {
		out, code := run(t, append([]string{"serve", "--source", "agent"}, strings.Fields(args)...)...)
		if code != 2 || !strings.Contains(out, says) {
			t.Errorf("serve %s: exit %d, want 2 and %q\n%s", args, code, says, out)
		}
	}
}
