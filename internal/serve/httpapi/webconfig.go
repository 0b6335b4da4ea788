package httpapi

import (
	"fmt"
	"os"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v2"
)

// WebConfig is what a web configuration file turns on: the file Prometheus
// exporters take as --web.config.file (TLS certificates, client
// certificates, bcrypt basic-auth users), read by the exporter toolkit
// itself, so its rules (and its constant-time password checks) are the
// toolkit's, not ours.
type WebConfig struct {
	// File is the configuration's path; "" serves plain HTTP with no
	// authentication.
	File string
	// TLS reports that the file sets a server certificate.
	TLS bool
	// ClientCerts reports that it asks clients for a certificate.
	ClientCerts bool
	// Users is how many basic-auth users it lists.
	Users int
}

// LoadWebConfig reads and checks the web configuration file at path (""
// is none). Every error is one line that names the file: a command treats
// it as bad usage.
func LoadWebConfig(path string) (WebConfig, error) {
	wc := WebConfig{File: path}
	if path == "" {
		return wc, nil
	}
	if err := web.Validate(path); err != nil {
		return wc, fmt.Errorf("web config %s: %v", path, oneLine(err.Error()))
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return wc, fmt.Errorf("web config: %v", err)
	}
	var c web.Config
	if err := yaml.Unmarshal(raw, &c); err != nil {
		return wc, fmt.Errorf("web config %s: %v", path, oneLine(err.Error()))
	}
	wc.TLS = c.TLSConfig.TLSCertPath != "" || c.TLSConfig.TLSCert != ""
	wc.ClientCerts = c.TLSConfig.ClientAuth != "" && c.TLSConfig.ClientAuth != "NoClientCert"
	wc.Users = len(c.Users)
	return wc, nil
}

// Scheme is the URL scheme the server answers on.
func (wc WebConfig) Scheme() string {
	if wc.TLS {
		return "https"
	}
	return "http"
}

// Open reports whether anyone who reaches the port may read everything:
// no authentication of any kind.
func (wc WebConfig) Open() bool { return wc.Users == 0 && !wc.ClientCerts }
