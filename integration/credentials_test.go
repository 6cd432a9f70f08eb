//go:build linux

package integration

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/internal/echotest"
)

const realKey = "sk-real-0123456789abcdef0123456789abcdef"

// providerCredential is a credentials block binding PROVIDER_REAL_KEY to
// hosts, in exactly the shape the README documents; extra lines are added
// to its entry.
func providerCredential(hosts string, extra ...string) string {
	block := `credentials:
  - name: provider
    source: {env: PROVIDER_REAL_KEY}      # or {file: PATH} or {command: "pass show provider"}
    hosts: [` + hosts + `]
    header: "Authorization: Bearer {}"
    env: PROVIDER_API_KEY                 # what the sandbox sees: a placeholder
`
	for _, line := range extra {
		block += "    " + line + "\n"
	}
	return block
}

// credentialProxy starts a proxy whose config binds PROVIDER_REAL_KEY to
// hosts, with the extra lines of providerCredential.
func credentialProxy(t *testing.T, hosts string, extra ...string) *proxyProc {
	return credentialsProxy(t, "provider", providerCredential(hosts, extra...))
}

// credentialsProxy starts a proxy for the credential name, configured by
// block (a credentials key), its secret PROVIDER_REAL_KEY.
func credentialsProxy(t *testing.T, name, block string) *proxyProc {
	o := testOrigin(t)
	dir := userDir(t, "cordon-it-cred-")
	cfg := dir + "/config.yaml"
	writeUserFile(t, cfg, []byte(fmt.Sprintf("allow: [%q]\n", originName+":8080")+block))
	return startProxyEnv(t, []string{"PROVIDER_REAL_KEY=" + realKey},
		"--config", cfg, "--credential", name, resolveOrigin, "--extra-ca", o.caFile)
}

func seenHeader(t *testing.T, path string) http.Header {
	t.Helper()
	h, ok := seen.Load(path)
	if !ok {
		t.Fatalf("the origin never received %s", path)
	}
	return h.(http.Header)
}

func TestCredentialInjection(t *testing.T) {
	// Capitals in the placeholder, which a host name is logged without.
	p := credentialProxy(t, originName+":8443", "placeholder_prefix: SK-")
	ph := p.env["PROVIDER_API_KEY"]
	if ph == "" || strings.Contains(ph, realKey) {
		t.Fatalf("cordon proxy exported PROVIDER_API_KEY=%q", ph)
	}
	for _, tc := range []struct{ name, host string }{
		{"as configured", originName},
		{"case variant", strings.ToUpper(originName)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/inject-" + strings.ReplaceAll(tc.name, " ", "-")
			body, _, code := curl(t, p, "--cacert", p.env["SSL_CERT_FILE"], "-H", "Authorization: Bearer "+ph,
				fmt.Sprintf("https://%s:%d%s", tc.host, originHTTPS, path))
			if code != 200 {
				t.Fatalf("bound request: %d %s", code, body)
			}
			if got := seenHeader(t, path).Get("Authorization"); got != "Bearer "+realKey {
				t.Fatalf("upstream received Authorization %q, want the real key", got)
			}
			// The origin echoes the header back; the client sees only the placeholder.
			if strings.Contains(body, realKey) || !strings.Contains(body, ph) {
				t.Fatalf("the sandboxed client saw the real key, or lost the placeholder:\n%s", body)
			}
		})
	}
	waitRecord(t, p.audit, audit.Record{Type: audit.TypeInject, Host: originName})

	// In the URL path of a header credential, over HTTP/1.1 and HTTP/2:
	// refused, the key going only where the credential's form puts it
	// (TestCredentialPathForm for a key in the path), and logged without
	// it (checked at the end).
	for _, proto := range []string{"--http1.1", "--http2"} {
		path := "/v1/" + ph + "/path" + proto
		body, _, code := curl(t, p, proto, "--cacert", p.env["SSL_CERT_FILE"], fmt.Sprintf("https://%s:%d%s", originName, originHTTPS, path))
		if code != 403 || !strings.Contains(body, "credential_placement") {
			t.Fatalf("%s: placeholder in the path of a header credential: %d %s", proto, code, body)
		}
		if _, ok := seen.Load("/v1/" + realKey + "/path" + proto); ok {
			t.Fatalf("%s: the origin got the key in the path", proto)
		}
	}
	waitRecord(t, p.audit, audit.Record{Decision: audit.Deny, Reason: "credential_placement", Credential: "provider"})
	// A header whose value an error message quotes (an Upgrade cordon's
	// forwarder refuses): the page holds neither the key nor the
	// placeholder.
	body, _, _ := curl(t, p, "--http1.1", "--cacert", p.env["SSL_CERT_FILE"], "-H", "Connection: Upgrade", "-H", "Upgrade: "+ph+"\tx",
		fmt.Sprintf("https://%s:%d/upgrade-quote", originName, originHTTPS))
	if strings.Contains(body, realKey) || strings.Contains(body, ph) {
		t.Fatalf("an error page quoted the key or the placeholder:\n%s", body)
	}

	// A placeholder toward an allowed host it is not bound to: refused.
	body, _, code := curl(t, p, "-H", "X-Api-Key: "+ph, fmt.Sprintf("http://%s:%d/misroute", originName, originHTTP))
	if code != 403 || !strings.Contains(body, "credential_misroute") {
		t.Fatalf("misrouted placeholder: %d %s", code, body)
	}
	if _, ok := seen.Load("/misroute"); ok {
		t.Fatal("a misrouted placeholder reached the origin")
	}
	r := waitRecord(t, p.audit, audit.Record{Decision: audit.Deny, Reason: "credential_misroute"})
	if r.Credential != "provider" {
		t.Fatalf("misroute record: %+v", r)
	}
	// A host named after the placeholder: refused, and logged without it,
	// though the log writes the name in lower case.
	if _, connect, _ := curl(t, p, "https://"+ph+".example.test/"); connect != 403 {
		t.Fatalf("a host named after the placeholder: CONNECT %d", connect)
	}
	waitRecord(t, p.audit, audit.Record{Decision: audit.Deny, Reason: "not_allowlisted", Port: 443})
	// The real value leaving toward any host: refused too.
	_, _, code = curl(t, p, "-H", "X-Leak: "+realKey, fmt.Sprintf("http://%s:%d/leak", originName, originHTTP))
	if code != 403 {
		t.Fatalf("real secret leaving: %d", code)
	}
	assertNoSecretInLog(t, p, ph)
}

// TestCredentialPathForm: a credential whose form is a path template
// (Telegram's /bot{}/) gets its key in the path where the template has
// it, over HTTP/1.1 and HTTP/2; its placeholder anywhere else, as the
// text of a message the bound host would post (sendMessage?text=KEY), is
// refused (403 credential_placement), never reaches the host, and is
// logged, naming the credential, without the key or the placeholder.
func TestCredentialPathForm(t *testing.T) {
	p := credentialsProxy(t, "bot", `credentials:
  - name: bot
    source: {env: PROVIDER_REAL_KEY}
    hosts: [`+originName+`:8443]
    path: "/bot{}/"
    env: BOT_TOKEN
`)
	ph := p.env["BOT_TOKEN"]
	if ph == "" || strings.Contains(ph, realKey) {
		t.Fatalf("cordon proxy exported BOT_TOKEN=%q", ph)
	}
	base := fmt.Sprintf("https://%s:%d/bot%s/", originName, originHTTPS, ph)
	for _, proto := range []string{"--http1.1", "--http2"} {
		method := "getMe" + proto
		body, _, code := curl(t, p, proto, "--cacert", p.env["SSL_CERT_FILE"], base+method)
		if code != 200 {
			t.Fatalf("%s: the key where the path template has it: %d %s", proto, code, body)
		}
		if _, ok := seen.Load("/bot" + realKey + "/" + method); !ok {
			t.Fatalf("%s: the origin did not get the key in the path", proto)
		}
		if strings.Contains(body, realKey) {
			t.Fatalf("%s: the client saw the key:\n%s", proto, body)
		}
		method = "sendMessage" + proto
		body, _, code = curl(t, p, proto, "--cacert", p.env["SSL_CERT_FILE"], base+method+"?chat_id=666&text="+ph)
		if code != 403 || !strings.Contains(body, "credential_placement") || !strings.Contains(body, `path: "/prefix{}/"`) {
			t.Fatalf("%s: the placeholder as a message's text: %d %s", proto, code, body)
		}
		if _, ok := seen.Load("/bot" + realKey + "/" + method); ok {
			t.Fatalf("%s: the origin got a request carrying the placeholder as a message's text", proto)
		}
	}
	r := waitRecord(t, p.audit, audit.Record{Decision: audit.Deny, Reason: "credential_placement"})
	if r.Credential != "bot" || !strings.Contains(r.Detail, "URL query") {
		t.Fatalf("placement record: %+v", r)
	}
	waitRecord(t, p.audit, audit.Record{Type: audit.TypeInject, Host: originName, Credential: "bot"})
	assertNoSecretInLog(t, p, ph)
}

// TestCredentialBodyRefusalIsADeny: a real secret at the end of a body
// too long to check before it streams is cut off on the way, after the
// request's decision line said allow; its close line says deny, so cordon
// audit --decision deny and --summary show the attempt (they showed
// nothing of it), over plain HTTP, HTTP/2 and HTTP/1.1.
func TestCredentialBodyRefusalIsADeny(t *testing.T) {
	p := credentialProxy(t, originName+":8443")
	dir := userDir(t, "cordon-it-body-")
	body := filepath.Join(dir, "body")
	writeUserFile(t, body, []byte(strings.Repeat("x", 1<<20)+realKey))
	paths := map[string][]string{
		"/leak-plain": {fmt.Sprintf("http://%s:%d/leak-plain", originName, originHTTP)},
		"/leak-h2":    {"--cacert", p.env["SSL_CERT_FILE"], fmt.Sprintf("https://%s:%d/leak-h2", originName, originHTTPS)},
		"/leak-h1":    {"--http1.1", "--cacert", p.env["SSL_CERT_FILE"], fmt.Sprintf("https://%s:%d/leak-h1", originName, originHTTPS)},
	}
	for path, args := range paths {
		if out, _, code := curl(t, p, append([]string{"--data-binary", "@" + body}, args...)...); code != 502 || !strings.Contains(out, "secret_leak") {
			t.Fatalf("%s: a body ending in the real key: %d %.300s", path, code, out)
		}
	}
	// Close lines go out with the next line, or within 100 ms.
	cut := func() (n int) {
		for _, r := range readAudit(t, p.audit) {
			if r.Type == audit.TypeClose && r.Reason == "secret_leak" {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(5 * time.Second); cut() < len(paths) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	out, err := exec.Command(cordonBin(t), "audit", "--file", p.audit, "--decision", "deny", "--json").Output()
	if err != nil {
		t.Fatalf("cordon audit --decision deny: %v", err)
	}
	// A plain request's close line names no path: its kind tells it.
	denied := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		switch {
		case r.Type != audit.TypeClose || r.Reason != "secret_leak":
		case r.Kind == audit.KindHTTP:
			denied["/leak-plain"] = true
		default:
			denied[r.Path] = true
		}
	}
	for path := range paths {
		if !denied[path] {
			t.Errorf("cordon audit --decision deny does not show the body cut off on %s:\n%s", path, out)
		}
	}
	out, err = exec.Command(cordonBin(t), "audit", "--file", p.audit, "--summary", "--host", originName).Output()
	if err != nil {
		t.Fatalf("cordon audit --summary: %v", err)
	}
	if f := strings.Fields(strings.Split(string(out), "\n")[1]); len(f) < 4 || f[2] != "3" || !strings.Contains(string(out), "secret_leak (3)") {
		t.Errorf("cordon audit --summary does not count the three cut bodies as denied:\n%s", out)
	}
}

func TestCredentialPlaintextRefused(t *testing.T) {
	p := credentialProxy(t, originName+":*")
	ph := p.env["PROVIDER_API_KEY"]
	body, _, code := curl(t, p, "-H", "Authorization: Bearer "+ph, fmt.Sprintf("http://%s:%d/plaintext", originName, originHTTP))
	if code != 403 || !strings.Contains(body, "credential_plaintext") {
		t.Fatalf("placeholder over plain HTTP: %d %s", code, body)
	}
	if _, ok := seen.Load("/plaintext"); ok {
		t.Fatal("a plaintext request with a placeholder reached the origin")
	}
	waitRecord(t, p.audit, audit.Record{Kind: audit.KindHTTP, Decision: audit.Deny, Reason: "credential_plaintext"})
	assertNoSecretInLog(t, p, ph)
}

// TestCredentialJSONEchoMasked: through the real proxy, a bound host
// that quotes the injected key in a JSON body, as the origin's echo does
// (Go's encoding/json, which escapes '"', '&', '<' and '>'), gives the
// client the placeholder, over HTTP/1.1 and HTTP/2. Before, a key holding
// one of those came back escaped (\u0026, \"), unmasked, one JSON
// decoding away.
func TestCredentialJSONEchoMasked(t *testing.T) {
	const key = `sk-real-0123&4567"89<ab>cdef0123456789abcdef`
	o := testOrigin(t)
	cfg := userDir(t, "cordon-it-cred-") + "/config.yaml"
	writeUserFile(t, cfg, []byte(providerCredential(originName+":8443")))
	p := startProxyEnv(t, []string{"PROVIDER_REAL_KEY=" + key},
		"--config", cfg, "--credential", "provider", resolveOrigin, "--extra-ca", o.caFile)
	ph := p.env["PROVIDER_API_KEY"]
	escaped, err := json.Marshal(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, proto := range []string{"--http1.1", "--http2"} {
		path := "/json-echo" + proto
		body, _, code := curl(t, p, proto, "--cacert", p.env["SSL_CERT_FILE"], "-H", "Authorization: Bearer "+ph,
			fmt.Sprintf("https://%s:%d%s", originName, originHTTPS, path))
		if got := seenHeader(t, path).Get("Authorization"); got != "Bearer "+key {
			t.Fatalf("%s: the origin received Authorization %q, want the real key", proto, got)
		}
		if code != 200 || strings.Contains(body, strings.Trim(string(escaped), `"`)) || !strings.Contains(body, `"Bearer `+ph+`"`) {
			t.Errorf("%s: the client got the key JSON-escaped, or lost the placeholder: %d\n%s", proto, code, body)
		}
	}
}

// assertNoSecretInLog checks neither the secret nor its placeholder is in
// the audit log or on cordon's stderr.
// TestCredentialWebSocketMasked: through the real proxy, a WebSocket
// message in which the bound host echoes the injected key reaches the
// client with the placeholder, however the host sends it: a client's
// permessage-deflate offer does not reach it (a compressed message
// carried the key whole), a message split over frames is masked across
// them (the key split between two frames did too), and a frame compressed
// all the same cuts the connection, unchecked_encoding on its close line.
// The other way, a real key in a frame the client masked cuts it too,
// secret_leak on its close line (the masked bytes hid it).
func TestCredentialWebSocketMasked(t *testing.T) {
	p := credentialProxy(t, originName+":8443")
	ph := p.env["PROVIDER_API_KEY"]
	target := fmt.Sprintf("%s:%d", originName, originHTTPS)
	handshake := func(t *testing.T, path string) *bufio.Reader {
		tc, br := h1Through(t, p, target)
		io.WriteString(tc, echotest.WebSocketRequest(path, target, "Authorization: Bearer "+ph))
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Extensions") != "" {
			t.Fatalf("handshake: %v %v; want 101 with no extension", resp, err)
		}
		return br
	}
	for _, path := range []string{"/websocket", "/websocket?fragmented"} {
		t.Run(path, func(t *testing.T) {
			msg, control, err := echotest.ReadWebSocketMessage(handshake(t, path))
			if msg != "key Bearer "+ph || err != nil || strings.Contains(strings.Join(control, " "), realKey) {
				t.Fatalf("message %q, control frames %q, %v; want the placeholder", msg, control, err)
			}
		})
	}
	t.Run("a real key in a masked frame", func(t *testing.T) {
		tc, br := h1Through(t, p, target)
		io.WriteString(tc, echotest.WebSocketRequest("/websocket?listen", target, "Authorization: Bearer "+ph))
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("handshake: %v %v", resp, err)
		}
		echotest.ReadWebSocketMessage(br)
		tc.Write(echotest.WebSocketClientFrame(0x81, []byte("leak "+realKey), [4]byte{7, 7, 7, 7}))
		io.ReadAll(br)
		waitFor(t, func() bool {
			return slices.ContainsFunc(readAudit(t, p.audit), func(r audit.Record) bool {
				return r.Type == audit.TypeClose && r.Path == "/websocket" && r.Reason == "secret_leak"
			})
		}, "a close line saying the WebSocket was cut for the real key")
	})
	t.Run("compressed unasked", func(t *testing.T) {
		if rest, _ := io.ReadAll(handshake(t, "/websocket?compressed")); len(rest) > 0 {
			t.Fatalf("after a compressed frame: %q; want the connection cut", rest)
		}
		waitFor(t, func() bool {
			return slices.ContainsFunc(readAudit(t, p.audit), func(r audit.Record) bool {
				return r.Type == audit.TypeClose && r.Path == "/websocket" && r.Reason == "unchecked_encoding"
			})
		}, "a close line saying the WebSocket was cut")
	})
	assertNoSecretInLog(t, p, ph)
}

func assertNoSecretInLog(t *testing.T, p *proxyProc, ph string) {
	t.Helper()
	// In any case: host names are logged in lower case.
	log := strings.ToLower(string(mustRead(t, p.audit)) + p.stderr.String())
	for _, s := range []string{realKey, ph} {
		if strings.Contains(log, strings.ToLower(s)) {
			t.Fatalf("the audit log or stderr holds a secret or placeholder")
		}
	}
}

// TestCredentialPosture: a credential that merely exists in the config
// changes nothing; one requested for the session adds its hosts to the
// effective allowlist, and that list is what cordon proxy shows.
func TestCredentialPosture(t *testing.T) {
	o := testOrigin(t)
	dir := userDir(t, "cordon-it-cred-")
	cfg := dir + "/config.yaml"
	writeUserFile(t, cfg, []byte(providerCredential(originName+":8443")))
	env := []string{"PROVIDER_REAL_KEY=" + realKey}
	target := fmt.Sprintf("https://%s:%d/posture", originName, originHTTPS)

	without := startProxyEnv(t, env, "--config", cfg, resolveOrigin, "--extra-ca", o.caFile)
	if _, ok := without.env["PROVIDER_API_KEY"]; ok {
		t.Fatal("an unrequested credential was exported")
	}
	if _, connect, _ := curl(t, without, "--cacert", without.env["SSL_CERT_FILE"], target); connect != 403 {
		t.Fatalf("a configured but unrequested credential widened the allowlist: connect %d", connect)
	}
	with := startProxyEnv(t, env, "--config", cfg, "--credential", "provider", resolveOrigin, "--extra-ca", o.caFile)
	if _, connect, code := curl(t, with, "--cacert", with.env["SSL_CERT_FILE"], target); connect != 200 || code != 200 {
		t.Fatalf("a requested credential's host is not on the effective allowlist: %d %d", connect, code)
	}
	waitFor(t, func() bool { return strings.Contains(with.stderr.String(), "allowed: "+originName+":8443") },
		"cordon proxy does not show the credential's host in its effective allowlist:\n"+with.stderr.String())
}

// TestCredentialInsideTheBox: in a restricted run the command sees only the
// placeholder, in its environment and in a masked file, and its output is
// masked; the request it makes carries the real key upstream.
func TestCredentialInsideTheBox(t *testing.T) {
	o := testOrigin(t)
	home := userDir(t, "cordon-it-home-")
	writeUserFile(t, home+"/.npmrc", []byte("//registry.example/:_authToken="+realKey+"\n"))
	cfg := home + "/config.yaml"
	writeUserFile(t, cfg, []byte(providerCredential(originName+":8443", "files: [~/.npmrc]")))
	ws := userDir(t, "cordon-it-ws-")
	auditDir := userDir(t, "cordon-it-audit-")
	r := runResult(t, 90*time.Second, cordonIn(t, ws, []string{"HOME=" + home, "PROVIDER_REAL_KEY=" + realKey},
		"run", "--net", "restricted", "--config", cfg, "--credential", "provider", "--audit", auditDir+"/a.jsonl",
		"--ephemeral-ca", resolveOrigin, "--extra-ca", o.caFile, "--",
		// The script spells the key in two halves, so its own text
		// (visible in /proc/*/cmdline) does not hold it.
		"sh", "-c", `A='`+realKey[:10]+`'; B='`+realKey[10:]+`'
echo "env: $PROVIDER_API_KEY"; echo "file: $(cat ~/.npmrc)"
printf '%s%s' "$A" "$B" > /tmp/needle
grep -lFf /tmp/needle /proc/[0-9]*/environ /proc/[0-9]*/cmdline ~/.npmrc /run/cordon/* 2>/dev/null && echo FOUND-IN-PROC
curl -sS -m 10 -H "Authorization: Bearer $PROVIDER_API_KEY" `+httpsOrigin+`/inside-box
echo "echo of the key: $A$B"`))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, realKey) || strings.Contains(r.stdout, "FOUND-IN-PROC") {
		t.Fatalf("the real key is visible inside the box or in its output:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "echo of the key: [masked:provider]") {
		t.Fatalf("output masking did not replace the key:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, `"path":"/inside-box"`) {
		t.Fatalf("the request from inside failed:\n%s\n%s", r.stdout, r.stderr)
	}
	if got := seenHeader(t, "/inside-box").Get("Authorization"); got != "Bearer "+realKey {
		t.Fatalf("upstream received %q, want the real key", got)
	}
	for _, prefix := range []string{"env: ", "file: //registry.example/:_authToken="} {
		if !strings.Contains(r.stdout, prefix) || strings.Contains(r.stdout, prefix+"\n") {
			t.Fatalf("missing %q with a placeholder:\n%s", prefix, r.stdout)
		}
	}
}

// TestCredentialFileShownInAnExposedTree: a credential's files: entry that
// a default deny_read store is, in a tree the run exposes (Maven's
// settings.xml in ~/.m2), is shown masked, not empty: the masked file is
// what the box reads there, as it is where the tree is not exposed.
func TestCredentialFileShownInAnExposedTree(t *testing.T) {
	b := newBox(t)
	b.file(b.home+"/.m2/settings.xml", "<settings><servers><server><password>"+realKey+"</password></server></servers></settings>\n")
	b.file(b.home+"/.m2/repository/x.pom", "pom\n")
	cfg := b.config(providerCredential(originName+":8443", "files: [~/.m2/settings.xml]"))
	r := runResult(t, 90*time.Second, cordonIn(t, b.ws, b.env("PROVIDER_REAL_KEY="+realKey),
		"run", "--audit", b.audit, "--net", "restricted", "--config", cfg, "--credential", "provider", "--ephemeral-ca",
		"--allow-path", b.home+"/.m2", "--", "sh", "-c", `echo "settings: [$(cat ~/.m2/settings.xml)]"; echo "pom: [$(cat ~/.m2/repository/x.pom)]"`))
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, realKey) || strings.Contains(r.stdout, "[masked:provider]") {
		t.Fatalf("the box read the real key:\n%s", r.stdout)
	}
	expectStdoutHas(t, r, "settings: [<settings><servers><server><password>", "pom: [pom]")
	if strings.Contains(r.stdout, "<password></password>") {
		t.Errorf("the password reads as empty, not as its placeholder:\n%s", r.stdout)
	}
}

// TestCredentialNotPassedIntoTheBox: a run whose command line or
// environment would carry a credential's real value is refused before
// anything of it starts, and the refusal's audit line does not hold the
// value either.
func TestCredentialNotPassedIntoTheBox(t *testing.T) {
	keyAuth := base64.StdEncoding.EncodeToString([]byte("someone:" + realKey))
	home := userDir(t, "cordon-it-home-")
	cfg := home + "/config.yaml"
	writeUserFile(t, cfg, []byte(providerCredential(originName+":8443")))
	ws := userDir(t, "cordon-it-ws-")
	for _, tc := range []struct {
		name   string
		args   []string
		reason string
	}{
		{"in the command line", []string{"--", "sh", "-c", "touch ran; echo " + realKey}, "credential_in_command"},
		{"its source variable passed", []string{"--env", "PROVIDER_REAL_KEY", "--", "touch", "ran"}, "credential_in_environment"},
		{"another variable holding it", []string{"--env", "COPY_OF_KEY", "--", "touch", "ran"}, "credential_in_environment"},
		// A Docker config's auth, a Basic credentials header: the box
		// decodes it.
		{"a variable holding it in base64", []string{"--env", "AUTH_OF_KEY", "--", "touch", "ran"}, "credential_in_environment"},
		{"in the command line in base64", []string{"--", "sh", "-c", "touch ran; echo " + keyAuth}, "credential_in_command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := userDir(t, "cordon-it-audit-") + "/a.jsonl"
			args := append([]string{"run", "--net", "restricted", "--config", cfg, "--credential", "provider", "--audit", log, "--ephemeral-ca"}, tc.args...)
			r := runResult(t, 60*time.Second, cordonIn(t, ws, []string{"HOME=" + home, "PROVIDER_REAL_KEY=" + realKey, "COPY_OF_KEY=" + realKey, "AUTH_OF_KEY=" + keyAuth}, args...))
			expectCode(t, r, 125)
			if _, err := os.Stat(ws + "/ran"); err == nil {
				t.Fatal("the command ran")
			}
			if !strings.Contains(r.stderr, "$PROVIDER_API_KEY") {
				t.Errorf("the refusal does not point at the placeholder's variable:\n%s", r.stderr)
			}
			data, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			if out := string(data) + r.stderr + r.stdout; strings.Contains(out, realKey) || strings.Contains(out, keyAuth) {
				t.Fatalf("the real key is in the audit log or cordon's output:\n%s\n%s", data, r.stderr)
			}
			recs := readAudit(t, log)
			if last := recs[len(recs)-1]; last.Type != audit.TypeBlock || last.Reason != tc.reason {
				t.Fatalf("last audit line %+v, want a block line with reason %s", last, tc.reason)
			}
			for _, rec := range recs {
				if rec.Type == audit.TypeLaunch {
					t.Fatalf("a launch line was written: %+v", rec)
				}
			}
		})
	}
}

// TestRefusalMasksTheCommandLine: a run refused for another reason (a
// denied command, a credential without the restricted network) records
// its command line with the selected credentials' secrets masked; one
// refused before they could be loaded (a project file cordon cannot read)
// leaves the command line out. Before, every refusal that came before the
// proxy started wrote the real key the command line held into the log.
func TestRefusalMasksTheCommandLine(t *testing.T) {
	home := userDir(t, "cordon-it-home-")
	cfg := home + "/config.yaml"
	writeUserFile(t, cfg, []byte(providerCredential(originName+":8443")+"deny_commands: [nc]\n"))
	keyAuth := base64.StdEncoding.EncodeToString([]byte("someone:" + realKey))
	for _, tc := range []struct {
		name, reason string
		args         []string
		project      string // the workspace's .cordon.yaml
		want         string // in the block line's command
	}{
		{"a denied command", "deny_command", []string{"--", "nc", "example.test", "80", realKey}, "", "[masked:provider]"},
		{"in base64", "deny_command", []string{"--", "nc", keyAuth}, "", "[masked:provider]"},
		{"no restricted network", "policy", []string{"--net", "open", "--", "curl", "-H", "Authorization: Bearer " + realKey}, "", "[masked:provider]"},
		{"before the credentials load", "policy", []string{"--", "echo", realKey}, "bogus_key: 1\n", "[not recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := userDir(t, "cordon-it-ws-")
			if tc.project != "" {
				writeUserFile(t, ws+"/.cordon.yaml", []byte(tc.project))
			}
			log := userDir(t, "cordon-it-audit-") + "/a.jsonl"
			args := append([]string{"run", "--net", "restricted", "--config", cfg, "--credential", "provider", "--audit", log, "--ephemeral-ca"}, tc.args...)
			r := runResult(t, 60*time.Second, cordonIn(t, ws, []string{"HOME=" + home, "PROVIDER_REAL_KEY=" + realKey}, args...))
			expectCode(t, r, 125)
			data := string(mustRead(t, log))
			if strings.Contains(data, realKey) || strings.Contains(data, keyAuth) {
				t.Fatalf("the real key is in the audit log:\n%s", data)
			}
			recs := readAudit(t, log)
			last := recs[len(recs)-1]
			if last.Type != audit.TypeBlock || last.Reason != tc.reason || !strings.Contains(strings.Join(last.Command, " "), tc.want) {
				t.Fatalf("last audit line %+v, want a %s block line whose command holds %q\n%s", last, tc.reason, tc.want, r.stderr)
			}
		})
	}
}

// TestCredentialSourceFileHidden: a credential's source file that lies
// where the box can see (the workspace, an allow_path) reads as empty
// inside, for the credential the run uses and for one it does not; the
// box can neither remove, rename nor overwrite it, nor rename a directory
// above it to take it somewhere the next run would not hide. What the
// command read is printed in hex, which the output's masking does not
// touch.
func TestCredentialSourceFileHidden(t *testing.T) {
	const spareKey = "sk-spare-fedcba9876543210fedcba9876543210"
	b := newBox(t)
	provider := filepath.Join(b.ws, "secrets", "deep", "provider.key")
	b.file(provider, realKey+"\n")
	keys := userDir(t, "cordon-it-keys-")
	spare := filepath.Join(keys, "spare.key")
	b.file(spare, spareKey+"\n")
	cfg := b.config(fmt.Sprintf(`credentials:
  - name: provider
    source: {file: %s}
    hosts: [%s:8443]
    header: "Authorization: Bearer {}"
    env: PROVIDER_API_KEY
  - name: spare
    source: {file: %s}
    hosts: [spare.example]
    header: "Authorization: Bearer {}"
    env: SPARE_API_KEY
`, provider, originName, spare))
	r := b.run("--net", "restricted", "--config", cfg, "--credential", "provider", "--ephemeral-ca", "--allow-path", keys, "--",
		"sh", "-c", `P=secrets/deep/provider.key S=`+spare+`
echo "provider: $(cat "$P" | wc -c) bytes"; echo "spare: $(cat "$S" | wc -c) bytes"
rm -f "$P" 2>/dev/null && echo REMOVED
mv "$P" moved.key 2>/dev/null && echo MOVED-FILE
mv secrets/deep secrets/moved 2>/dev/null && echo MOVED-DIR
mv secrets moved 2>/dev/null && echo MOVED-TOP
rm -rf secrets 2>/dev/null; echo x > "$P" 2>/dev/null && echo WROTE
echo "hex: $(cat "$P" "$S" moved.key secrets/moved/provider.key moved/deep/provider.key 2>/dev/null | od -An -tx1 | tr -d ' \n')"`)
	expectCode(t, r, 0)
	for _, want := range []string{"provider: 0 bytes", "spare: 0 bytes", "hex: \n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q: a source file was read, or not as expected:\n%s", want, r.stdout)
		}
	}
	for _, s := range []string{realKey, spareKey, hex.EncodeToString([]byte(realKey)), hex.EncodeToString([]byte(spareKey)),
		"REMOVED", "MOVED-", "WROTE"} {
		if strings.Contains(r.stdout, s) {
			t.Errorf("the box read a source file, or moved or wrote it (%q):\n%s", s, r.stdout)
		}
	}
	if got, err := os.ReadFile(provider); err != nil || string(got) != realKey+"\n" {
		t.Errorf("the source file in the workspace is not where it was, as it was, after the run: %v", err)
	}
}

// TestCredentialSourceHiddenWhenProjectDropsIt: a project file, which
// an earlier run may have written, that drops the credentials
// (credentials: []) leaves their source files hidden: they still hold
// the real secrets. Before, the box hid only the sources of the
// credentials left in the effective policy, and read these.
func TestCredentialSourceHiddenWhenProjectDropsIt(t *testing.T) {
	b := newBox(t)
	source := filepath.Join(b.ws, "secrets", "provider.key")
	b.file(source, realKey+"\n")
	b.file(filepath.Join(b.ws, ".cordon.yaml"), "credentials: []\n")
	cfg := b.config(fmt.Sprintf(`credentials:
  - name: provider
    source: {file: %s}
    hosts: [api.provider.example]
    header: "Authorization: Bearer {}"
    env: PROVIDER_API_KEY
`, source))
	r := b.run("--net", "off", "--config", cfg, "--", "sh", "-c", `echo "hex: $(od -An -tx1 secrets/provider.key | tr -d ' \n')"`)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "hex: \n") || strings.Contains(r.stdout, hex.EncodeToString([]byte(realKey))) {
		t.Fatalf("the box read the source file of a credential the project file dropped:\n%s", r.stdout)
	}
}

// A credential's source command runs on the host, before the box exists.
// It runs from the home directory: from the workspace, cordon's working
// directory, a tool that looks there first (python3 -m, npx, uv run,
// bundle exec, sh with "." on PATH) would run what an earlier run planted,
// with the user's rights, outside any box.
func TestCredentialCommandRunsOutsideTheWorkspace(t *testing.T) {
	b := newBox(t)
	marker := filepath.Join(b.ws, "ran-on-the-host")
	cfg := b.config(`credentials:
  - name: provider
    source: {command: "python3 -m cordonplant 2>/dev/null; PATH=.:$PATH cordon-plant 2>/dev/null; echo sk-from-command-0123456789"}
    hosts: [api.provider.example]
    header: "Authorization: Bearer {}"
    env: PROVIDER_API_KEY
`)
	plant := fmt.Sprintf(`printf 'open("%s", "w").write("python")\n' > cordonplant.py
printf '#!/bin/sh\necho sh > %s\n' > cordon-plant && chmod +x cordon-plant && echo PLANTED`, marker, marker)
	r := b.run("--net", "off", "--", "sh", "-c", plant)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "PLANTED") {
		t.Fatalf("the first run did not plant its files:\n%s%s", r.stdout, r.stderr)
	}
	r = b.run("--net", "restricted", "--config", cfg, "--credential", "provider", "--ephemeral-ca", "--", "sh", "-c", `echo "placeholder: ${PROVIDER_API_KEY:+set}"`)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "placeholder: set") {
		t.Fatalf("the credential was not loaded:\n%s%s", r.stdout, r.stderr)
	}
	if got, err := os.ReadFile(marker); err == nil {
		t.Fatalf("the credential's source command ran what the box planted in the workspace, on the host (%q)", got)
	}
}

// A credential's source command runs on the host with a PATH that leaves
// out the directories the box may write: with a project's virtualenv
// activated, its bin (in the workspace) comes first on PATH, and a
// program of the command's name that a run planted there ran, outside
// any box, at the next run that loaded the credential.
func TestCredentialCommandPassesOverTheWorkspacesPath(t *testing.T) {
	b := newBox(t)
	marker := filepath.Join(b.ws, "ran-on-the-host")
	venv := filepath.Join(b.ws, ".venv", "bin")
	cfg := b.config(`credentials:
  - name: provider
    source: {command: "cordon-token 2>/dev/null || echo sk-from-command-0123456789"}
    hosts: [api.provider.example]
    header: "Authorization: Bearer {}"
    env: PROVIDER_API_KEY
`)
	plant := fmt.Sprintf(`mkdir -p .venv/bin && printf '#!/bin/sh\necho ran > %s\necho sk-planted-0123456789\n' > .venv/bin/cordon-token && chmod +x .venv/bin/cordon-token && echo PLANTED`, marker)
	r := b.run("--net", "off", "--", "sh", "-c", plant)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "PLANTED") {
		t.Fatalf("the first run did not plant its program:\n%s%s", r.stdout, r.stderr)
	}
	cmd := cordonIn(t, b.ws, b.env("PATH="+venv+":/usr/local/bin:/usr/bin:/bin"), "run", "--audit", b.audit, "--net", "restricted", "--config", cfg,
		"--credential", "provider", "--ephemeral-ca", "--", "sh", "-c", `echo "placeholder: ${PROVIDER_API_KEY:+set}"`)
	r = runResult(t, runTimeout, cmd)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "placeholder: set") {
		t.Fatalf("the credential was not loaded:\n%s%s", r.stdout, r.stderr)
	}
	if got, err := os.ReadFile(marker); err == nil {
		t.Fatalf("the credential's source command ran the program the box planted on PATH, on the host (%q)", got)
	}
}

// TestCredentialCommandPassesOverNarrowedAllowPath: the source command
// also runs without the PATH entries in a read-write allow_paths of the
// global config that a project file narrows away: the box of an earlier
// run wrote there, and can write the project file too. Before, the box
// planted a program in its read-write allow_path and a .cordon.yaml
// making that path read-only, and the next run's source command ran the
// program on the host.
func TestCredentialCommandPassesOverNarrowedAllowPath(t *testing.T) {
	b := newBox(t)
	marker := filepath.Join(b.ws, "ran-on-the-host")
	tools := userDir(t, "cordon-it-tools-")
	cfg := b.config(fmt.Sprintf(`allow_paths: [%s:rw]
credentials:
  - name: provider
    source: {command: "cordon-token 2>/dev/null || echo sk-from-command-0123456789"}
    hosts: [api.provider.example]
    header: "Authorization: Bearer {}"
    env: PROVIDER_API_KEY
`, tools))
	plant := fmt.Sprintf(`mkdir -p %[1]s/bin && printf '#!/bin/sh\necho ran > %[2]s\necho sk-planted-0123456789\n' > %[1]s/bin/cordon-token && chmod +x %[1]s/bin/cordon-token &&
echo 'allow_paths: [%[1]s]' > .cordon.yaml && echo PLANTED`, tools, marker)
	r := b.run("--net", "off", "--config", cfg, "--", "sh", "-c", plant)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "PLANTED") {
		t.Fatalf("the first run did not plant its program:\n%s%s", r.stdout, r.stderr)
	}
	cmd := cordonIn(t, b.ws, b.env("PATH="+filepath.Join(tools, "bin")+":/usr/local/bin:/usr/bin:/bin"), "run", "--audit", b.audit, "--net", "restricted", "--config", cfg,
		"--credential", "provider", "--ephemeral-ca", "--", "sh", "-c", `echo "placeholder: ${PROVIDER_API_KEY:+set}"; touch `+tools+`/bin/x 2>/dev/null || echo READ-ONLY`)
	r = runResult(t, runTimeout, cmd)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "placeholder: set") || !strings.Contains(r.stdout, "READ-ONLY") {
		t.Fatalf("the credential was not loaded, or the project file did not narrow the path:\n%s%s", r.stdout, r.stderr)
	}
	if got, err := os.ReadFile(marker); err == nil {
		t.Fatalf("the credential's source command ran the program the box planted in a path the project file narrowed, on the host (%q)", got)
	}
}

// TestProjectFileCannotShowWhatDenyReadHides: a project file may narrow
// an expose or read-write allow_paths entry to a path inside it, and the
// box writes the project file; one narrowed to a file in a deny_read
// directory showed the file whole, read-write with :rw, at the next run
// (red team, round 8). The file reads as empty, and cannot be written.
func TestProjectFileCannotShowWhatDenyReadHides(t *testing.T) {
	b := newBox(t)
	tools := userDir(t, "cordon-it-tools-")
	token := filepath.Join(tools, "vault", "token")
	b.file(token, "VAULT-TOKEN-s.abcdef")
	cfg := b.config(fmt.Sprintf("network: off\nexpose: [%[1]s]\nallow_paths: [%[1]s:rw]\ndeny_read: [%[1]s/vault]\n", tools))
	r := b.run("--config", cfg, "--", "sh", "-c", fmt.Sprintf(`cat %s; printf 'expose: [%s]\nallow_paths: ["%s:rw"]\n' > .cordon.yaml`, token, token, token))
	expectCode(t, r, 0)
	if strings.Contains(r.stdout, "VAULT") {
		t.Fatalf("the first run read the denied file:\n%s", r.stdout)
	}
	r = b.run("--config", cfg, "--", "sh", "-c", fmt.Sprintf(`cat %[1]s; echo; echo OVERWRITTEN > %[1]s || echo UNWRITTEN`, token))
	if strings.Contains(r.stdout, "VAULT") || !strings.Contains(r.stdout, "UNWRITTEN") {
		t.Errorf("a project file narrowed into a deny_read directory showed its file (exit %d):\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got, err := os.ReadFile(token); err != nil || string(got) != "VAULT-TOKEN-s.abcdef" {
		t.Errorf("the denied file on the host holds %q (%v)", got, err)
	}
}
