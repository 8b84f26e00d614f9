// A page or section heading; wraps (a title is never cut short). level 1: page, 2: section.
import QtQuick

FsLabel {
    property int level: 2
    font.pixelSize: level === 1 ? Theme.fontTitle : Theme.fontSubtitle
    font.bold: true
    wrapMode: Text.WordWrap
    Accessible.role: Accessible.Heading
}
