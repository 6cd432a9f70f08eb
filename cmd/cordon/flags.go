package main

import (
	"github.com/spf13/cobra"

	"github.com/cordon-sandbox/cordon/policy"
)

// policyFlags are the flags that shape a session's policy, shared by
// `cordon proxy` and `cordon run`.
type policyFlags struct {
	config      string
	allow, deny []string
	resolve     []string
	extraCA     []string
	terminate   string
	ephemeralCA bool
	credentials []string
	overrides   policy.Overrides
}

func (f *policyFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "global config file (default $CORDON_CONFIG or ~/.config/cordon/config.yaml)")
	fl.StringArrayVar(&f.allow, "allow", nil, "allow a host pattern for this invocation: example.com, *.example.com, host:PORT, host:*, 192.0.2.0/24 (repeatable)")
	fl.StringArrayVar(&f.deny, "deny", nil, "deny a host pattern; denies win over allows (repeatable)")
	fl.StringArrayVar(&f.resolve, "resolve", nil, "pin a name to an address, NAME=ADDRESS, consulted before DNS (repeatable)")
	fl.StringArrayVar(&f.extraCA, "extra-ca", nil, "PEM file of a site CA to trust upstream and add to the client bundle (repeatable)")
	fl.StringVar(&f.terminate, "terminate", "", "TLS termination: all (default) or none (opaque tunnels)")
	fl.StringArrayVar(&f.credentials, "credential", nil, "use the configured credential NAME: the command sees a placeholder, the proxy sends the secret only to its hosts (repeatable)")
	fl.BoolVar(&f.ephemeralCA, "ephemeral-ca", false, "use a CA that lives only for this session instead of ~/.config/cordon/ca")
}

// proxyOnly names the flags given that only the egress proxy acts on:
// with the network off or open (no proxy) they change nothing.
func (f *policyFlags) proxyOnly() []string {
	var given []string
	for _, fl := range []struct {
		name string
		set  bool
	}{
		{"--allow", len(f.allow) > 0}, {"--deny", len(f.deny) > 0}, {"--resolve", len(f.resolve) > 0},
		{"--extra-ca", len(f.extraCA) > 0}, {"--terminate", f.terminate != ""}, {"--ephemeral-ca", f.ephemeralCA},
	} {
		if fl.set {
			given = append(given, fl.name)
		}
	}
	return given
}

// loadFrom builds the effective policy (config files, then these flags)
// with the caller's options (workdir, workspace rules), and says what it
// read; the flags fill in the config path and the overrides.
func (f *policyFlags) loadFrom(o policy.LoadOptions) (*policy.Policy, policy.Sources, error) {
	o.ConfigPath = f.config
	o.Overrides = f.overrides
	o.Overrides.Allow = append(o.Overrides.Allow, f.allow...)
	o.Overrides.Deny = append(o.Overrides.Deny, f.deny...)
	o.Overrides.Resolve = append(o.Overrides.Resolve, f.resolve...)
	o.Overrides.ExtraCA = append(o.Overrides.ExtraCA, f.extraCA...)
	o.Overrides.Terminate = f.terminate
	return policy.Load(o)
}
