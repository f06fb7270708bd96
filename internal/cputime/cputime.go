// Package cputime measures CPU time for benchmarks on a shared machine.
package cputime
