package main

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cordon-sandbox/cordon/policy"
)

func init() { register("connect", newConnectCmd) }

func newConnectCmd() *cobra.Command {
	var proxy string
	cmd := &cobra.Command{
		Use:   "connect HOST PORT",
		Short: "Open a tunnel through cordon's proxy and relay it on stdin/stdout (an ssh ProxyCommand)",
		Long: `Open a CONNECT tunnel to HOST:PORT through the proxy in $HTTPS_PROXY (or
--proxy) and relay it on standard input and output, so tools that take a
ProxyCommand reach allowed hosts:

  ssh -o ProxyCommand='cordon connect %h %p' git@example.com
  GIT_SSH_COMMAND="ssh -o ProxyCommand='cordon connect %h %p'" git clone ssh://...

Inside a restricted sandbox, GIT_SSH_COMMAND is already set this way.`,
		Args: exactArgs(2, "a HOST and a PORT", "cordon connect github.com 22"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if proxy == "" {
				proxy = os.Getenv("HTTPS_PROXY")
			}
			if proxy == "" {
				return fmt.Errorf("no proxy: set HTTPS_PROXY (cordon proxy prints it) or pass --proxy URL")
			}
			u, err := proxyURL(proxy)
			if err != nil {
				return err
			}
			target, err := connectTarget(args[0], args[1])
			if err != nil {
				return err
			}
			c, br, err := connectThrough(u, target)
			if err != nil {
				return exitError{code: 1, msg: err.Error()}
			}
			defer c.Close()
			go func() {
				io.Copy(c, cmd.InOrStdin())
				if tc, ok := c.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
			}()
			io.Copy(cmd.OutOrStdout(), br)
			return nil
		},
	}
	cmd.Flags().StringVar(&proxy, "proxy", "", "proxy URL (default $HTTPS_PROXY)")
	return cmd
}

// proxyURL reads the proxy's URL. connect speaks plain HTTP to the proxy,
// so only an http:// one is taken: an https:// proxy's password (a
// corporate proxy's, in $HTTPS_PROXY) went out in clear to wherever it
// listens, as did a SOCKS proxy's, in a CONNECT it does not speak.
func proxyURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("proxy %q is not a URL such as http://cordon:TOKEN@127.0.0.1:PORT", redactedURL(raw))
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("proxy %s: cordon connect speaks plain HTTP CONNECT, so it takes only an http:// proxy URL (as cordon proxy prints), not %s://, which would have it send the proxy's password in clear", u.Redacted(), u.Scheme)
	}
	return u, nil
}

// redactedURL is raw, which did not parse as a URL, without what may be a
// password: whatever comes before its last '@'.
func redactedURL(raw string) string {
	if i := strings.LastIndexByte(raw, '@'); i >= 0 {
		return "…" + raw[i:]
	}
	return raw
}

// connectTarget reads connect's HOST and PORT (what ssh's %h and %p
// give) into the authority to ask the proxy for. They were joined and
// read as one, so a HOST holding a colon (a URL, host:22) was said to
// hold brackets it never had.
func connectTarget(hostArg, portArg string) (string, error) {
	const example = "; for example: cordon connect github.com 22"
	if _, rest, ok := strings.Cut(hostArg, "://"); ok {
		h, _, _ := strings.Cut(rest, "/")
		return "", fmt.Errorf("HOST %q is a URL; give the host alone%s", hostArg, strings.Replace(example, "github.com", h, 1))
	}
	host, err := policy.NormalizeHost(hostArg)
	if err != nil {
		return "", fmt.Errorf("HOST %q: %w%s", hostArg, err, example)
	}
	port, err := policy.ParsePort(portArg)
	if err != nil {
		return "", fmt.Errorf("PORT: %w%s", err, example)
	}
	return policy.JoinHostPort(host, port), nil
}

// connectThrough opens a CONNECT tunnel; the reader holds any bytes the
// far end sent along with the proxy's answer.
func connectThrough(proxy *url.URL, target string) (net.Conn, *bufio.Reader, error) {
	c, err := net.DialTimeout("tcp", proxy.Host, 10*time.Second)
	if err != nil {
		return nil, nil, fmt.Errorf("reach the proxy %s: %w", proxy.Host, err)
	}
	auth := ""
	if pass, ok := proxy.User.Password(); ok {
		auth = "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(proxy.User.Username()+":"+pass)) + "\r\n"
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, auth)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("CONNECT %s: %w", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		c.Close()
		return nil, nil, fmt.Errorf("CONNECT %s refused: %s (%s) %s", target, resp.Status, resp.Header.Get("X-Cordon-Reason"), strings.TrimSpace(string(body)))
	}
	c.SetDeadline(time.Time{})
	return c, br, nil
}
