"""The shell: the main window, its menus, status bar and dialogs, the entry point, start-up, logging
and the screenshot tool. It hosts the views; nothing below it imports it."""
