// The older name of FsLabel, kept so existing pages read the same.
FsLabel {}
