"""View-models: what the QML screens show and every action they trigger, testable without QML."""
