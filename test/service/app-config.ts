/**
 * The app's configuration for route tests: the service's own defaults, resolved by
 * src/config exactly as the server gets them (the one place defaults live), with the fields a
 * test cares about set over them.
 */
import { validateServiceConfig } from "../../src/config/service-config.ts";
import type { AppConfig } from "../../src/service/app.ts";

// Only to satisfy the required keys; every test sets its own rules and controllers.
const MINIMAL = {
  store: "file:///nonexistent",
  creation_rules: [{ age: "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p" }],
  controllers: [{ name: "unused", tokenSha256: "0".repeat(64), scopes: ["admin"] }],
  // Not the checkout's sea/: a test that wants served executables makes its own directory.
  artifacts: { dir: "/nonexistent/bootseal-artifacts" },
};

export function appConfig(overrides: Partial<AppConfig> = {}): AppConfig {
  return { ...validateServiceConfig(MINIMAL), ...overrides };
}
