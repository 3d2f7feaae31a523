# openapi-spec-validator (PyPI): validates the service's OpenAPI document against the OpenAPI
# 3.0 schema and its rules (test/service/openapi.test.ts). A command, no daemon; in the shared
# venv, where moto[server] also wants it (>=0.5.0). Sourced by scripts/peers.sh.
OPENAPI_SPEC_VALIDATOR_VER=0.9.0
openapi_spec_validator_version() { echo "openapi-spec-validator==$OPENAPI_SPEC_VALIDATOR_VER (PyPI)"; }
openapi_spec_validator_installed() {
  pip_has openapi_spec_validator "$OPENAPI_SPEC_VALIDATOR_VER" && [[ -x "$VENV/bin/openapi-spec-validator" ]]
}
openapi_spec_validator_install() { pip_install "openapi-spec-validator==$OPENAPI_SPEC_VALIDATOR_VER"; }
openapi_spec_validator_env() {
  printf 'export BOOTSEAL_TEST_OPENAPI_SPEC_VALIDATOR=%q\n' "$VENV/bin/openapi-spec-validator"
}
