// Secondary text: hints, counts, captions; smaller and muted, always wrapping.
import QtQuick
FsLabel {
    color: Theme.textMuted
    font.pixelSize: Theme.fontCaption
    wrapMode: Text.WordWrap
}
