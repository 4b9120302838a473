package proxyproto

import "net/netip"

// Textual addresses of v1 lines. netip.ParseAddr would do, but it takes a
// string, and converting the field to one allocates; these read the bytes in
// place and accept exactly what netip.ParseAddr accepts, zones excepted. With
// partial they say instead whether the bytes can begin a valid address, so
// that the v1 parser refuses a bad one at its first wrong byte.

// parseAddr reads an IPv4 address, or an IPv6 one when v6 is set, and
// returns it unmapped.
func parseAddr(s []byte, v6 bool) (netip.Addr, bool) {
	if !v6 {
		ip, ok := ipv4(s, false)
		return netip.AddrFrom4(ip), ok
	}
	ip, ok := ipv6(s, false)
	return netip.AddrFrom16(ip).Unmap(), ok
}

// ipv4 reads dotted decimal: four numbers in [0, 255], without leading
// zeroes, separated by single dots.
func ipv4(s []byte, partial bool) ([4]byte, bool) {
	var ip [4]byte
	k, val, digits := 0, 0, 0 // numbers done, the current one, its digits
	for i := 0; i <= len(s); i++ {
		if i == len(s) && partial {
			return ip, k < len(ip)
		}
		if i == len(s) || s[i] == '.' {
			if digits == 0 || k == len(ip) {
				return ip, false
			}
			ip[k] = byte(val)
			k, val, digits = k+1, 0, 0
			continue
		}
		c := s[i]
		if c < '0' || c > '9' || (digits > 0 && val == 0) {
			return ip, false
		}
		val = val*10 + int(c-'0')
		digits++
		if val > 255 {
			return ip, false
		}
	}
	return ip, k == len(ip)
}

// ipv6 reads groups of one to four hex digits separated by colons, at most
// one "::" standing for one or more zero groups, and optionally a dotted
// IPv4 address in place of the last two groups.
func ipv6(s []byte, partial bool) ([16]byte, bool) {
	var ip [16]byte
	if partial && len(s) == 1 && s[0] == ':' {
		return ip, true // the start of "::"
	}
	ellipsis := -1 // index in ip where "::" stands
	if len(s) >= 2 && s[0] == ':' && s[1] == ':' {
		ellipsis = 0
		s = s[2:]
	}
	i := 0 // bytes of ip filled
	for len(s) > 0 {
		if i == len(ip) {
			return ip, false
		}
		n, v := 0, 0
		for ; n < len(s) && n <= 4; n++ {
			d, ok := hexDigit(s[n])
			if !ok {
				break
			}
			v = v<<4 | d
		}
		if n < len(s) && s[n] == '.' {
			// The dotted IPv4 tail: only as the last 4 bytes (or
			// before them with "::" somewhere to fill the gap).
			if (ellipsis < 0 && i != 12) || i+4 > len(ip) {
				return ip, false
			}
			ip4, ok := ipv4(s, partial)
			if !ok {
				return ip, false
			}
			copy(ip[i:], ip4[:])
			i += 4
			break
		}
		if n == 0 || n > 4 {
			return ip, false
		}
		// Whether another group fits: "::" must keep one for itself.
		room := i < len(ip) && (ellipsis < 0 || i+2 < len(ip))
		if n == len(s) && partial {
			// A group, or the start of the dotted tail, still arriving.
			return ip, room
		}
		ip[i], ip[i+1] = byte(v>>8), byte(v)
		i += 2
		s = s[n:]
		if len(s) == 0 {
			break
		}
		if s[0] != ':' {
			return ip, false
		}
		if len(s) == 1 {
			// A trailing colon: invalid, or the start of another group
			// or of "::".
			return ip, partial && i < len(ip) && (ellipsis < 0 || i+2 < len(ip))
		}
		s = s[1:]
		if s[0] == ':' {
			if ellipsis >= 0 {
				return ip, false
			}
			ellipsis = i
			s = s[1:]
		}
	}
	if i == len(ip) && ellipsis >= 0 {
		// "::" must stand for at least one group.
		return ip, false
	}
	if partial {
		return ip, true
	}
	if i < len(ip) {
		if ellipsis < 0 {
			return ip, false
		}
		gap := len(ip) - i
		copy(ip[ellipsis+gap:], ip[ellipsis:i])
		clear(ip[ellipsis : ellipsis+gap])
	}
	return ip, true
}

func hexDigit(c byte) (int, bool) {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0'), true
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10, true
	}
	return 0, false
}

func addrPort(a netip.Addr, port uint16) netip.AddrPort {
	return netip.AddrPortFrom(a, port)
}
