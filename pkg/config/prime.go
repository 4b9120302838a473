package config

// isPrime reports whether n is prime by trial division, which is plenty for
// the Maglev table sizes accepted (at most MaxMaglevTableSize).
func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	if n%2 == 0 {
		return n == 2
	}
	for d := 3; d*d <= n; d += 2 {
		if n%d == 0 {
			return false
		}
	}
	return true
}
