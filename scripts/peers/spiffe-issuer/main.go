// bootseal-spiffe-issuer: a SPIFFE bundle endpoint and JWT-SVID issuer for bootseal's tests,
// built on go-spiffe v2 (github.com/spiffe/go-spiffe/v2) and go-jose. It is NOT SPIRE: SPIRE
// is not built here (the module proxy serves its current release only from a copy that is not
// an approved release). What the service under test talks to is real SPIFFE code: the bundle
// endpoint is go-spiffe's own federation handler (federation.NewHandler) serving bundles that
// go-spiffe marshals (spiffebundle.Bundle.Marshal), over both profiles of the SPIFFE Federation
// spec: https_web (a Web PKI certificate) and https_spiffe (an X509-SVID of the trust domain,
// served with go-spiffe's tlsconfig). JWT-SVIDs are signed with go-jose as SPIRE signs them
// (header kid and typ JWT; sub, aud, exp, iat), and /validate checks a token with go-spiffe's
// jwtsvid.ParseAndValidate so tests can compare bootseal's verdict with go-spiffe's.
//
// Listeners (all on 127.0.0.1): -web (https_web), -spiffe (https_spiffe), -control (plain
// HTTP, for the tests only). On both bundle listeners GET /<trust-domain> is that domain's
// bundle. -dir receives web-ca.pem (the root of the https_web certificate) and
// bootseal.test.bundle.json (the bootstrap bundle an https_spiffe client starts from).
//
// Control API (JSON bodies):
//
//	POST /domain  {"td","alg"}                 a new trust domain with one JWT key (idempotent)
//	POST /mint    {"td","sub","aud","ttl","iatOffset","key","typ"}
//	                                           a JWT-SVID signed by td's current key; "key":
//	                                           "stranger" signs with a key no bundle holds
//	POST /rotate  {"td","alg"}                 a new JWT key, published, signing from now on
//	POST /retire  {"td","kid"}                 the key leaves the bundle
//	GET  /bundle?td=                           the bundle, as the endpoint serves it
//	POST /validate {"token","aud"}             go-spiffe's verdict on a token
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/spiffe/go-spiffe/v2/bundle/spiffebundle"
	"github.com/spiffe/go-spiffe/v2/federation"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/jwtsvid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// The trust domain whose X509-SVID the https_spiffe listener presents.
const endpointDomain = "bootseal.test"
const endpointPath = "/bundle-endpoint"

type signingKey struct {
	kid string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

type domain struct {
	td      spiffeid.TrustDomain
	bundle  *spiffebundle.Bundle // thread-safe; what the endpoint serves
	handler http.Handler
	mu      sync.Mutex
	current signingKey
	seq     uint64
}

type issuer struct {
	mu          sync.Mutex
	domains     map[string]*domain
	refreshHint time.Duration
}

func newKey(alg jose.SignatureAlgorithm) (signingKey, error) {
	var key crypto.Signer
	var err error
	switch alg {
	case jose.ES256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.ES384:
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case jose.RS256, jose.PS256:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		return signingKey{}, fmt.Errorf("unsupported alg %q", alg)
	}
	if err != nil {
		return signingKey{}, err
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	return signingKey{kid: hex.EncodeToString(id), alg: alg, key: key}, nil
}

func (s *issuer) domain(name string, alg jose.SignatureAlgorithm) (*domain, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.domains[name]; ok {
		return d, nil
	}
	td, err := spiffeid.TrustDomainFromString(name)
	if err != nil {
		return nil, err
	}
	k, err := newKey(alg)
	if err != nil {
		return nil, err
	}
	b := spiffebundle.New(td)
	if err := b.AddJWTAuthority(k.kid, k.key.Public()); err != nil {
		return nil, err
	}
	b.SetRefreshHint(s.refreshHint)
	b.SetSequenceNumber(1)
	h, err := federation.NewHandler(td, b)
	if err != nil {
		return nil, err
	}
	d := &domain{td: td, bundle: b, handler: h, current: k, seq: 1}
	s.domains[name] = d
	return d, nil
}

func (s *issuer) lookup(name string) *domain {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.domains[name]
}

func (d *domain) bump() {
	d.seq++
	d.bundle.SetSequenceNumber(d.seq)
}

// serveBundles: GET /<trust-domain> is answered by that domain's federation handler.
func (s *issuer) serveBundles(w http.ResponseWriter, r *http.Request) {
	d := s.lookup(strings.TrimPrefix(r.URL.Path, "/"))
	if d == nil {
		http.NotFound(w, r)
		return
	}
	d.handler.ServeHTTP(w, r)
}

type request struct {
	TD        string   `json:"td"`
	Alg       string   `json:"alg"`
	Sub       string   `json:"sub"`
	Aud       []string `json:"aud"`
	TTL       int64    `json:"ttl"`
	IatOffset int64    `json:"iatOffset"`
	Key       string   `json:"key"`
	Kid       string   `json:"kid"`
	Typ       string   `json:"typ"`
	Token     string   `json:"token"`
}

func algOf(r request) jose.SignatureAlgorithm {
	if r.Alg == "" {
		return jose.ES256
	}
	return jose.SignatureAlgorithm(r.Alg)
}

func mint(k signingKey, r request) (string, error) {
	typ := r.Typ
	if typ == "" {
		typ = "JWT"
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.key, KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)),
	)
	if err != nil {
		return "", err
	}
	ttl := r.TTL
	if ttl == 0 {
		ttl = 300
	}
	now := time.Now().Add(time.Duration(r.IatOffset) * time.Second)
	claims := jwt.Claims{
		Subject:  r.Sub,
		Audience: jwt.Audience(r.Aud),
		IssuedAt: jwt.NewNumericDate(now),
		Expiry:   jwt.NewNumericDate(now.Add(time.Duration(ttl) * time.Second)),
	}
	return jwt.Signed(signer).Claims(claims).Serialize()
}

func (s *issuer) control() http.Handler {
	mux := http.NewServeMux()
	body := func(w http.ResponseWriter, r *http.Request) (request, bool) {
		var req request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return req, false
		}
		return req, true
	}
	existing := func(w http.ResponseWriter, name string) *domain {
		d := s.lookup(name)
		if d == nil {
			http.Error(w, "no such trust domain", http.StatusNotFound)
		}
		return d
	}
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("POST /domain", func(w http.ResponseWriter, r *http.Request) {
		req, ok := body(w, r)
		if !ok {
			return
		}
		d, err := s.domain(req.TD, algOf(req))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		reply(w, map[string]string{"kid": d.current.kid})
	})
	mux.HandleFunc("POST /mint", func(w http.ResponseWriter, r *http.Request) {
		req, ok := body(w, r)
		if !ok {
			return
		}
		d := existing(w, req.TD)
		if d == nil {
			return
		}
		d.mu.Lock()
		k := d.current
		d.mu.Unlock()
		if req.Key == "stranger" {
			var err error
			if k, err = newKey(k.alg); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		token, err := mint(k, req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		reply(w, map[string]string{"token": token, "kid": k.kid})
	})
	mux.HandleFunc("POST /rotate", func(w http.ResponseWriter, r *http.Request) {
		req, ok := body(w, r)
		if !ok {
			return
		}
		d := existing(w, req.TD)
		if d == nil {
			return
		}
		k, err := newKey(algOf(req))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if err := d.bundle.AddJWTAuthority(k.kid, k.key.Public()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		d.current = k
		d.bump()
		reply(w, map[string]string{"kid": k.kid})
	})
	mux.HandleFunc("POST /retire", func(w http.ResponseWriter, r *http.Request) {
		req, ok := body(w, r)
		if !ok {
			return
		}
		d := existing(w, req.TD)
		if d == nil {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.bundle.RemoveJWTAuthority(req.Kid)
		d.bump()
		reply(w, map[string]string{"retired": req.Kid})
	})
	mux.HandleFunc("GET /bundle", func(w http.ResponseWriter, r *http.Request) {
		d := existing(w, r.URL.Query().Get("td"))
		if d == nil {
			return
		}
		data, err := d.bundle.Marshal()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
	mux.HandleFunc("POST /validate", func(w http.ResponseWriter, r *http.Request) {
		req, ok := body(w, r)
		if !ok {
			return
		}
		s.mu.Lock()
		set := spiffebundle.NewSet()
		for _, d := range s.domains {
			set.Add(d.bundle)
		}
		s.mu.Unlock()
		svid, err := jwtsvid.ParseAndValidate(req.Token, set, req.Aud)
		if err != nil {
			reply(w, map[string]any{"ok": false, "error": err.Error()})
			return
		}
		reply(w, map[string]any{"ok": true, "id": svid.ID.String()})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return mux
}

func selfSigned(template *x509.Certificate, key crypto.Signer) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// webCertificate: a root (written to web-ca.pem) and a server certificate for 127.0.0.1 and
// localhost, as a Web PKI endpoint would have (the client trusts the root as a CA bundle).
func webCertificate(dir string) (tls.Certificate, error) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	ca, err := selfSigned(&x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "bootseal-spiffe-issuer test web root"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(47 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, key.Public(), caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	pemCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	if err := os.WriteFile(filepath.Join(dir, "web-ca.pem"), pemCA, 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// endpointSVID: an X.509 authority for the endpoint's trust domain (added to its bundle) and
// the X509-SVID spiffe://bootseal.test/bundle-endpoint it signs, for the https_spiffe listener.
func endpointSVID(d *domain) (*x509svid.SVID, error) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	trustDomainURI, _ := url.Parse(d.td.IDString())
	ca, err := selfSigned(&x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "bootseal-spiffe-issuer X.509 authority"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		URIs: []*url.URL{trustDomainURI},
	}, caKey)
	if err != nil {
		return nil, err
	}
	d.bundle.AddX509Authority(ca)
	id, err := spiffeid.FromPath(d.td, endpointPath)
	if err != nil {
		return nil, err
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial(), NotBefore: now.Add(-time.Hour), NotAfter: now.Add(47 * time.Hour),
		URIs:     []*url.URL{id.URL()},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, ca, key.Public(), caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return x509svid.ParseRaw(der, keyDER)
}

func listen(addr string, handler http.Handler, config *tls.Config) {
	server := &http.Server{Addr: addr, Handler: handler, TLSConfig: config, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		var err error
		if config != nil {
			err = server.ListenAndServeTLS("", "")
		} else {
			err = server.ListenAndServe()
		}
		log.Fatalf("%s: %v", addr, err)
	}()
}

func main() {
	web := flag.String("web", "127.0.0.1:0", "https_web bundle endpoint address")
	spiffeAddr := flag.String("spiffe", "127.0.0.1:0", "https_spiffe bundle endpoint address")
	controlAddr := flag.String("control", "127.0.0.1:0", "control API address (plain HTTP)")
	dir := flag.String("dir", ".", "where web-ca.pem and the bootstrap bundle are written")
	refreshHint := flag.Duration("refresh-hint", 2*time.Second, "spiffe_refresh_hint of every bundle")
	flag.Parse()

	s := &issuer{domains: map[string]*domain{}, refreshHint: *refreshHint}
	d, err := s.domain(endpointDomain, jose.ES256)
	if err != nil {
		log.Fatal(err)
	}
	svid, err := endpointSVID(d)
	if err != nil {
		log.Fatal(err)
	}
	bootstrap, err := d.bundle.Marshal()
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*dir, endpointDomain+".bundle.json"), bootstrap, 0o644); err != nil {
		log.Fatal(err)
	}
	cert, err := webCertificate(*dir)
	if err != nil {
		log.Fatal(err)
	}
	bundles := http.HandlerFunc(s.serveBundles)
	listen(*web, bundles, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	listen(*spiffeAddr, bundles, tlsconfig.TLSServerConfig(svid))
	listen(*controlAddr, s.control(), nil)
	log.Printf("bootseal-spiffe-issuer: https_web %s, https_spiffe %s (%s), control %s", *web, *spiffeAddr,
		svid.ID, *controlAddr)
	select {}
}
