static int unused;
