package verify

// Test keys of the public-key schemes (keyScheme), made with openssl
// genpkey for these tests alone: PKCS#8 PEM private keys, which verify and
// sign.
const (
	testEd25519Key1 = `-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIItrsp0UoBgNIX/BAccaRdTdioub3WDzzf5tS0/Vibi1
-----END PRIVATE KEY-----`
	testEd25519Key2 = `-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIP0TadXOj66sR+GRLjITVhmb6HxU2id3gxR0NdaRmUrD
-----END PRIVATE KEY-----`
	testP256Key1 = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg6dApL1fMGiU8v7hi
pYstJvL3I90WxCdsCUGy8Qbn5QmhRANCAATwpf6/lMX95TEoFJmTVOB/AR6OAsbG
6Th65vDymelwfWdKmjzEoqxw+CjtYUNqM/KQqBgY/PYJiuI5CBw/vIwm
-----END PRIVATE KEY-----`
	testP256Key2 = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgJPo7/dav1XUC5oi1
Tl+qJXVSgVgs7iR7IAvq8/TKVNmhRANCAAR2bCiUJ3oYLeXEXDWRHJPGEPgIgFcy
sanrxvNG7EL/YoHi39+B8+siIWuAAARXB/Xq5qgpy2WTOFwBrFxPlUh7
-----END PRIVATE KEY-----`
)
