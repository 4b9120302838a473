// Package config is the TOML schema of l4lb: it reads one file, fills in
// every default, and validates it strictly, reporting every problem at once
// with the dotted key and the line it is on.
//
// Strictness is the point: an unknown key is almost always a typo that would
// otherwise silently leave a default in force, so it is an error, as are
// wrong types and impossible values. BurntSushi/toml reports no line for
// values or unknown keys, so the package scans the source itself to locate
// every key (see positions.go).
//
// Every key is stated once, in the schema (schema.go): its type, default,
// bounds, allowed values and meaning. Parse takes bounds and values from
// it, the Default* functions take their defaults from it, and the key
// reference docs/configuration.md is generated from it (reference.go) by
// `go generate ./pkg/config`; a test fails when the committed reference
// differs. The packages configured (breaker, health, fleet, hashring) have
// no defaults of their own: the wiring passes them the parsed values.
//
// Only cmd and this package import the TOML library; everything else takes
// the typed Config.
package config

//go:generate go run ./internal/gendoc -o ../../docs/configuration.md
