package sandbox

// ProtectedHome lists, relative to the home directory, the stores no
// policy may open to a command on any platform: keys, cloud and cluster
// credentials, and cordon's own configuration, CA and state. Backends add
// their platform's own (the macOS login keychain).
var ProtectedHome = []string{
	".ssh",
	".gnupg",
	".aws",
	".kube",
	".docker",
	".config/gh",
	".config/cordon",
	".local/share/cordon",
	".local/share/keyrings",
}
