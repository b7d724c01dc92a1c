//! The endpoint methods of [`Client`](crate::api::Client), one module per resource of the
//! interface document, section "Endpoints".

mod analytics;
mod api_keys;
mod paging;
mod sending_domains;
mod sub_accounts;
mod transmission;

pub use paging::LIST_ALL_PAGE_SIZE;

#[cfg(test)]
mod tests {
    use secrecy::SecretString;
    use url::Url;

    use crate::api::*;

    fn assert_send<T: Send>(_: &T) {}

    /// Every endpoint future is `Send`, so callers can spawn it (kube-rs controllers do).
    #[test]
    fn endpoint_futures_are_send() {
        let url = Url::parse("http://127.0.0.1:9").unwrap();
        let client =
            Client::new(ClientConfig::new(url.clone(), url, SecretString::from("k"))).unwrap();
        let c = &client;
        assert_send(&c.list_api_keys(&ListApiKeysQuery::default()));
        assert_send(&c.list_all_api_keys(&ListApiKeysQuery::default()));
        assert_send(&c.create_api_key(&CreateApiKey::default()));
        assert_send(&c.get_api_key(1));
        assert_send(&c.update_api_key(1, &UpdateApiKey::default()));
        assert_send(&c.delete_api_key(1));
        assert_send(&c.list_sub_accounts(&ListSubAccountsQuery::default()));
        assert_send(&c.list_all_sub_accounts(&ListSubAccountsQuery::default()));
        assert_send(&c.create_sub_account(&CreateSubAccount::default()));
        assert_send(&c.get_sub_account(1));
        assert_send(&c.update_sub_account(1, &UpdateSubAccount::default()));
        assert_send(&c.send_transmission(&Transmission::default()));
        assert_send(&c.list_sending_domains(&ListSendingDomainsQuery::default()));
        assert_send(&c.list_all_sending_domains(&ListSendingDomainsQuery::default()));
        assert_send(&c.create_sending_domain(&CreateSendingDomain::default()));
        assert_send(&c.list_unverified_spf());
        assert_send(&c.get_sending_domain(1));
        assert_send(&c.delete_sending_domain(1));
        assert_send(&c.share_sending_domain(1));
        assert_send(&c.spf_suggestion(1));
        assert_send(&c.verify_txt(1));
        assert_send(&c.analytics_summary(&AnalyticsQuery::default()));
        assert_send(&c.analytics_breakdown(&BreakdownQuery::default()));
        assert_send(&c.transmission_status("t"));
        assert_send(&c.transmission_events("t"));
    }
}
