/* placeholder so the format target has a source; removed when real code lands. */
typedef int ht__placeholder_format;
