package certs

// BundleVar is one environment variable that points a client at a CA bundle.
type BundleVar struct {
	Name   string // the variable
	ReadBy string // who reads it
}

// bundleVars is the one table of variables set to the trust bundle's path;
// the README's list is copied from it.
var bundleVars = []BundleVar{
	{"SSL_CERT_FILE", "OpenSSL and everything built on it (curl, Python ssl, httpx, Ruby, PHP, .NET on Linux), Go, Rust's rustls-native-certs and openssl-probe, uv"},
	{"REQUESTS_CA_BUNDLE", "Python requests and tools built on it (pip, poetry, Azure CLI)"},
	{"CURL_CA_BUNDLE", "the curl command; Python requests when REQUESTS_CA_BUNDLE is unset"},
	{"NODE_EXTRA_CA_CERTS", "Node.js and Bun (added to their built-in roots when the process starts)"},
	{"GIT_SSL_CAINFO", "git over HTTPS"},
	{"PIP_CERT", "pip (its --cert option)"},
	{"AWS_CA_BUNDLE", "AWS CLI and AWS SDKs"},
	{"CARGO_HTTP_CAINFO", "cargo (its http.cainfo setting)"},
	{"DENO_CERT", "Deno"},
	{"npm_config_cafile", "npm and pnpm (their cafile setting)"},
	{"YARN_CA_FILE_PATH", "Yarn 2 and 3 (caFilePath)"},
	{"YARN_HTTPS_CA_FILE_PATH", "Yarn 4 (httpsCaFilePath)"},
	{"BUNDLE_SSL_CA_CERT", "Ruby Bundler (its ssl_ca_cert setting)"},
	{"COMPOSER_CAFILE", "PHP Composer"},
	{"HEX_CACERTS_PATH", "Elixir's Hex and Mix (Hex otherwise uses its own bundled roots)"},
	{"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "gRPC's C core (grpcio for Python, gRPC for Ruby, PHP, C++)"},
	{"HTTPLIB2_CA_CERTS", "Python httplib2 (google-api-python-client)"},
	{"CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE", "Google Cloud CLI (gcloud)"},
	{"PERL_LWP_SSL_CA_FILE", "Perl LWP::UserAgent"},
	{"JULIA_SSL_CA_ROOTS_PATH", "Julia (NetworkOptions, so Pkg and Downloads)"},
	{"NIX_SSL_CERT_FILE", "Nix"},
}

// BundleVars returns the table of variables BundleEnv sets, with who reads
// each, for documentation.
func BundleVars() []BundleVar {
	return append([]BundleVar(nil), bundleVars...)
}

// BundleEnv returns "NAME=path" environment entries that point every common
// client (see BundleVars) at the trust bundle at path.
func BundleEnv(path string) []string {
	env := make([]string, len(bundleVars))
	for i, v := range bundleVars {
		env[i] = v.Name + "=" + path
	}
	return env
}
