package policy

import (
	"slices"
	"testing"
)

// TestDefaultDenyReadCoversStores holds which files under the home
// directory read as empty by default, even when a tree covering them is
// exposed (a toolchain's ~/.m2, an agent's ~/.claude), and that what a
// toolchain or an agent reads beside them does not.
func TestDefaultDenyReadCoversStores(t *testing.T) {
	p, err := layered("", "", Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path   string // below the home directory
		hidden bool
	}{
		// Browsers' and mail clients' profiles, desktop keyrings.
		{".mozilla/firefox/abc.default/logins.json", true},
		{".mozilla/firefox/abc.default/cookies.sqlite", true},
		{".thunderbird/abc.default/key4.db", true},
		{".config/google-chrome/Default/Cookies", true},
		{".config/google-chrome/Default/Login Data", true},
		{".config/chromium/Default/Cookies", true},
		{".config/BraveSoftware/Brave-Browser/Default/Cookies", true},
		{".config/microsoft-edge/Default/Cookies", true},
		{".config/vivaldi/Default/Cookies", true},
		{".local/share/keyrings/login.keyring", true},
		{".local/share/kwalletd/kdewallet.kwl", true},
		// Cloud, storage and deployment CLIs.
		{".config/rclone/rclone.conf", true},
		{".s3cfg", true},
		{".boto", true},
		{".oci/config", true},
		{".oci/oci_api_key.pem", true},
		{".config/doctl/config.yaml", true},
		{".netlify/config.json", true},
		{".config/netlify/config.json", true},
		{".vercel/auth.json", true},
		{".local/share/com.vercel.cli/auth.json", true},
		{".terraformrc", true},
		{".terraform.d/credentials.tfrc.json", true},
		{".pulumi/credentials.json", true},
		{".config/containers/auth.json", true},
		{".config/helm/repositories.yaml", true},
		{".config/helm/registry/config.json", true},
		// Code hosts, registries, build tools.
		{".config/hub", true},
		{".config/glab-cli/config.yml", true},
		{".m2/settings.xml", true},
		{".m2/settings-security.xml", true},
		{".gradle/gradle.properties", true},
		{".yarnrc.yml", true},
		{".composer/auth.json", true},
		{".config/composer/auth.json", true},
		{".config/configstore/firebase-tools.json", true},
		// Password managers.
		{".config/op/config", true},
		{".op/config", true},
		{".config/Bitwarden CLI/data.json", true},
		// Coding agents' logins.
		{".claude/.credentials.json", true},
		{".codex/auth.json", true},
		{".gemini/oauth_creds.json", true},
		{".config/github-copilot/hosts.json", true},
		{".config/github-copilot/apps.json", true},
		// What toolchains and agents read beside them stays seen.
		{".m2/repository/org/example/x/1.0/x-1.0.jar", false},
		{".m2/wrapper/dists/x.zip", false},
		{".gradle/caches/modules-2/files-2.1/x.jar", false},
		{".gradle/wrapper/dists/gradle-8.10-bin/x.zip", false},
		{".terraform.d/plugin-cache/registry.terraform.io/x", false},
		{".pulumi/plugins/resource-aws-v6.0.0/pulumi-resource-aws", false},
		{".config/rclone/filters.txt", false},
		{".config/helm/plugins/x", false},
		{".config/composer/composer.json", false},
		{".cache/composer/files/x.zip", false},
		{".claude/settings.json", false},
		{".claude/CLAUDE.md", false},
		{".claude/commands/review.md", false},
		{".codex/config.toml", false},
		{".codex/AGENTS.md", false},
		{".gemini/settings.json", false},
		{".config/github-copilot/versions.json", false},
		{".cargo/registry/index/x", false},
		{".npm/_cacache/x", false},
		{".config/git/config", false},
		{".local/share/fonts/x.ttf", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			path := testHome + "/" + tt.path
			hidden := slices.ContainsFunc(p.DenyRead, func(d string) bool { return Within(path, d) })
			if hidden != tt.hidden {
				t.Errorf("~/%s reads as empty by default: %v, want %v (deny_read %q)", tt.path, hidden, tt.hidden, p.DenyRead)
			}
		})
	}
}
